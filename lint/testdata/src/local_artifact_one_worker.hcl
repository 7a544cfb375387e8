# Near miss: on one worker the versions stay where the reader runs.
pipeline "alone" {
  workers = 1
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw_orders"]
  }
  task "load" {
    command = ["./load.sh"]
    inputs  = ["raw_orders"]
  }
}
