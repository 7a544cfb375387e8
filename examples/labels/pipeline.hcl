// Tasks that only some workers may run: extract needs a worker started with
// --label ingest, aggregate one with --label spark (see README.md).
pipeline "labels" {
  code_version = "1"

  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw"]
    labels  = ["ingest"]
  }

  task "aggregate" {
    command = ["./aggregate.sh"]
    inputs  = ["raw"]
    outputs = ["totals"]
    labels  = ["spark"]

    failover {
      per_worker = 1
      global     = 2
    }
  }
}
