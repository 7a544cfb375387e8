# Several workers, a task reading another's output, no shared store: the
# accepted raw_orders would stay on the disk of the worker that ran extract.
pipeline "spread" {
  workers = 3 // want "local-artifact: runs on 3 workers [(]its workers field[)] but sets no shared artifact store: task \x22load\x22 reads \x22raw_orders\x22, which task \x22extract\x22 produces"
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw_orders"]
  }
  task "load" {
    command = ["./load.sh"]
    inputs  = ["raw_orders"]
  }
}
