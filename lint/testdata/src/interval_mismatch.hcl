pipeline "im" {
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw"]
  }
  task "future" {
    command = ["./x.sh"]
    inputs  = ["raw@+1"] // want "interval-mismatch"
  }
  task "prev_only" {
    command    = ["./x.sh"]
    inputs     = ["raw@-1"]
    depends_on = ["extract"] // want "interval-mismatch"
  }
  # Near misses: this interval and the previous one; a rolling window with no depends_on.
  task "both" {
    command    = ["./x.sh"]
    inputs     = ["raw", "raw@-1"]
    depends_on = ["extract"]
  }
  task "rolling" {
    command = ["./x.sh"]
    inputs  = ["raw@-1"]
  }
}
