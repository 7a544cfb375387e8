pipeline "cs" {
  schedule {
    every   = "24h"
    start   = "2024-01-01T00:00:00Z"
    catchup = true // want "catchup-stampede"
  }
  pool "backfill" {
    slots = 2
  }
  task "extract" {
    command = ["./extract.sh"]
    pool    = "backfill"
    timeout = "10m"
  }
}
