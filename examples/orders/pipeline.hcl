# orders: the reference example of docs/design.md section 3, end to end:
# extract a day of orders, clean them, audit the result and publish it to a
# fenced directory sink.
pipeline "orders" {
  code_version = "2024.06.1"

  schedule {
    every           = "24h"
    start           = "2024-01-01T00:00:00Z"
    catchup         = false
    max_active_runs = 1
  }

  pool "backfill" { slots = 2 }

  error "transient" {
    exit_codes = [75]
    match      = ["connection reset", "503"]
  }

  error "schema" {
    exit_codes    = [65]
    deterministic = true
  }

  retry "default" {
    max_attempts = 4
    initial      = "10s"
    multiplier   = 2
    max_delay    = "10m"
    jitter       = "full"
    max_elapsed  = "1h"
    on           = ["transient"]
  }

  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw_orders"]
    retry   = "default"
    timeout = "20m"
    heartbeat {
      every = "10s"
      lease = "60s"
    }
  }

  task "clean" {
    command = ["./clean.sh"]
    inputs  = ["raw_orders"]
    outputs = ["orders_clean"]
    retry   = "default"
  }

  check "orders_clean_ok" {
    input         = "orders_clean"
    row_count_min = 1
    unique        = ["order_id"]
  }

  sink "warehouse" {
    type    = "directory"
    path    = "warehouse/orders"
    fencing = "token"
  }

  publish "orders_mart" {
    artifact = "orders_clean"
    sink     = "warehouse"
  }
}
