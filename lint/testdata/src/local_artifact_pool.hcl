# The pool comes from the configuration (two workers), not the spec: the
# finding is at the pipeline block.
# lint-workers: - -
pipeline "pooled" { // want "local-artifact: runs on 2 workers [(]from .pipec.yaml or --workers[)]"
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw_orders"]
  }
  task "load" {
    command = ["./load.sh"]
    inputs  = ["raw_orders"]
  }
}
