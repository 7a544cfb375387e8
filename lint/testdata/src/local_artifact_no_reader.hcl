# Near miss: several workers and no store, but no task reads another's
# output (the tasks publish through sinks of their own), and one reads only
# its own previous version.
pipeline "apart" {
  workers = 3
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "extract" {
    command = ["./extract.sh"]
  }
  task "count" {
    command = ["./count.sh"]
    outputs = ["counts"]
    inputs  = ["counts@-1"]
  }
}
