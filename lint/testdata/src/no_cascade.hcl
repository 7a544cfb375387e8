# One mistake, one finding: a value the loader refuses is reported by schema
# alone; the rules that read the field treat it as present but invalid.
pipeline "nc" {
  schedule {
    every           = "24h"
    start           = "2024-01-01T00:00:00Z"
    catchup         = true
    max_active_runs = -1 // want "schema"
  }
  retry_budget {
    ratio = 0.2
    min   = 3
  }
  error "transient" {
    exit_codes = [75]
  }
  retry "minus" {
    max_attempts = -1 // want "schema: 0 means unlimited attempts"
    on           = ["transient"]
  }
  retry "filter" {
    max_attempts = 3
    on           = "transient" // want "schema"
  }
  retry "mult" {
    max_attempts = 3
    multiplier   = -2 // want "schema"
    on           = ["transient"]
  }
  retry "elapsed" {
    max_attempts = 0
    max_elapsed  = "an hour" // want "schema"
    on           = ["transient"]
  }
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw"]
    retry   = "minus"
    timeout = "20 minutes" // want "schema: invalid duration"
    failover {
      per_worker = 1.5 // want "schema"
      global     = 3
    }
  }
  task "clean" {
    command    = ["./clean.sh"]
    inputs     = ["raw", "raw@x"] // want "schema"
    outputs    = ["clean", "maybe_read"]
    retry      = "filter"
    timeout    = "10m"
    effects    = ["notify"]
    idempotent = "yes" // want "schema"
  }
  task "load" {
    command = ["./load.sh"]
    inputs  = ["clean"]
    retry   = "mult"
    timeout = "10m"
    failover {
      per_worker = 2
      global     = -1 // want "schema"
    }
  }
  task "forever" {
    command = ["./forever.sh"]
    retry   = "elapsed"
    timeout = "10m"
  }
  check "clean_ok" {
    input         = "clean"
    row_count_min = -1 // want "schema"
  }
  sink "lake" {
    type    = "s3"
    path    = "s3://lake/nc"
    fencing = "tokens" // want "schema"
  }
  publish "clean_lake" {
    artifact = "clean"
    sink     = "lake"
  }
}
