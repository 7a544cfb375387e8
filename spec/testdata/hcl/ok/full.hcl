# Every field of the grammar, with every comment style HCL allows.
// pipec:ignore unused-artifact the mart is read outside pipec
/* a block
   comment */
pipeline "full" {
  code_version = "2024.06.1"

  retry_budget {
    ratio = 0.2 # retries at most 20% of the run's first attempts...
    min   = 3   # ...but always allow at least 3
  }

  schedule {
    every   = "1h"
    start   = "2024-03-01T06:00:00+02:00"
    catchup = true
  }

  pool "backfill" {
    slots = 2
  }

  error "transient" {
    exit_codes = [75, 111]
    match      = ["connection reset"]
  }

  retry "fast" {
    max_attempts = 0
    jitter       = "equal"
    multiplier   = 1.5
    on           = []
  }

  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw_orders"]
  }

  task "load" {
    command    = ["./load.sh", "--day", "2024-01-01"]
    inputs     = ["raw_orders", "raw_orders@-1"] // this interval and the previous one
    depends_on = ["extract"]
    env        = { MODE = "full", "LEVEL" = "3" }
    secret_env = ["WAREHOUSE_PASSWORD"]
    effects    = ["notify"]
    labels     = ["warehouse", "eu-west.1"]
    idempotent = false
    pool       = "backfill"
    retry      = "fast" // want "non-idempotent-retry"
    timeout    = "1h30m"

    failover {
      per_worker = 2
      global     = 3
    }
  }

  check "raw_ok" {
    input         = "raw_orders"
    row_count_min = 0
    row_count_max = 1000000
    unique        = ["order_id", "line"]
    not_null      = ["order_id"]
    columns       = ["order_id", "line", "amount"]
    code_version_column = "code_version"
    command       = ["./audit.sh", "--strict"]
  }

  sink "lake" {
    type = "s3"
    path = "s3://bucket/orders"
  }

  publish "raw_mart" {
    artifact = "raw_orders"
    sink     = "lake"
  }
}
