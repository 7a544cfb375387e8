pipeline "bv" {
  task "clean" {
    command = ["./clean.sh"]
    outputs = ["orders_clean", "orders_rejected"]
  }
  task "summary" {
    command = ["./summary.sh"]
    outputs = ["summary"]
  }
  task "stats" {
    command = ["./stats.sh"]
    outputs = ["stats"]
  }

  # Near miss: a check on the producer's other output does not validate orders_clean.
  check "rejected_ok" {
    input         = "orders_rejected"
    row_count_max = 100
  }
  check "summary_ok" { // want "empty-check"
    input = "summary"
  }
  check "stats_ok" {
    input   = "stats"
    command = ["./audit.sh"]
  }

  sink "warehouse" {
    type = "directory"
    path = "warehouse/bv"
  }
  sink "rejected" {
    type = "directory"
    path = "warehouse/rejected"
  }
  sink "summary" {
    type = "directory"
    path = "warehouse/summary"
  }
  sink "stats" {
    type = "directory"
    path = "warehouse/stats"
  }
  sink "ghost" {
    type = "directory"
    path = "warehouse/ghost"
  }

  publish "orders_mart" {
    artifact = "orders_clean" // want "bypassed-validation"
    sink     = "warehouse"
  }
  publish "rejected_mart" {
    artifact = "orders_rejected"
    sink     = "rejected"
  }
  # Its only check asserts nothing.
  publish "summary_mart" {
    artifact = "summary" // want "bypassed-validation"
    sink     = "summary"
  }
  publish "stats_mart" {
    artifact = "stats"
    sink     = "stats"
  }
  # One mistake, one error: no bypassed-validation for an artifact nothing produces.
  publish "ghost_mart" {
    artifact = "ghost" // want "missing-artifact"
    sink     = "ghost"
  }
}
