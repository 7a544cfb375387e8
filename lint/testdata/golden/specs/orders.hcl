pipeline "orders" {
  code_version = "2024.06.1"

  schedule {
    every   = "24h"
    start   = "2024-01-01T00:00:00Z"
    catchup = true
  }

  pool "backfill" {
    slots = 2
  }

  error "schema" {
    exit_codes    = [65]
    deterministic = true
  }

  retry "default" {
    max_attempts = 4
    jitter       = "none"
    on           = ["timeout", "schema"]
  }

  task "extract" {
    command = ["./extract.sh", "--out", "/dev/shm/raw.csv"]
    outputs = ["raw_orders"]
    pool    = "backfill"
    retry   = "default"
    timeout = "10m"
    env     = { WAREHOUSE_PASSWORD = "hunter2" }
  }

  task "clean" {
    command = ["./clean.sh"]
    inputs  = ["raw_orders"]
    outputs = ["orders_clean", "orders_debug"]
    retry   = "default" // pipec:ignore heartbeat-lease clean.sh enforces its own deadline
  }

  check "orders_clean_ok" {
    input = "orders_clean"
  }

  sink "lake" {
    type = "s3"
    path = "s3://lake/orders"
  }

  publish "orders_lake" {
    artifact = "orders_clean"
    sink     = "lake"
  }
}
