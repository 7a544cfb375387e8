# backfill: a daily, incremental pipeline built to be backfilled safely: catch-up
# is bounded (max_active_runs), backfill runs share a 2-slot pool, and each day's
# running totals read the previous day's accepted totals (an input at offset -1).
pipeline "daily_totals" {
  code_version = "2024.06.1"

  schedule {
    every           = "24h"
    start           = "2024-01-01T00:00:00Z"
    catchup         = true
    max_active_runs = 2
  }

  pool "backfill" { slots = 2 }

  error "transient" {
    exit_codes = [75]
  }

  retry "transient_only" {
    max_attempts = 3
    initial      = "5s"
    multiplier   = 2
    max_delay    = "1m"
    jitter       = "full"
    max_elapsed  = "10m"
    on           = ["transient"]
  }

  task "events" {
    command = ["./events.sh"]
    outputs = ["day_events"]
    retry   = "transient_only"
    pool    = "backfill"
    timeout = "10m"
  }

  task "totals" {
    command = ["./totals.sh"]
    inputs  = ["day_events", "running_totals@-1"]
    outputs = ["running_totals"]
    retry   = "transient_only"
    pool    = "backfill"
    timeout = "10m"
  }

  check "totals_ok" {
    input         = "running_totals"
    row_count_min = 1
    unique        = ["customer"]
    not_null      = ["total"]
  }

  sink "marts" {
    type    = "directory"
    path    = "marts/daily_totals"
    fencing = "token"
  }

  publish "daily_totals" {
    artifact = "running_totals"
    sink     = "marts"
  }
}
