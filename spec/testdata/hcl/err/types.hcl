pipeline "types" {
  code_version = ["1"]

  schedule {
    every           = 24
    start           = "2024-01-01T00:00:00Z"
    catchup         = "yes"
    max_active_runs = -1
  }

  retry_budget {
    ratio = -0.5
    min   = 1.5
  }

  pool "zero" { slots = 0 }
  pool "text" { slots = "two" }

  error "codes" {
    exit_codes    = [300, 1.5, -1, "x", 2]
    match         = "connection reset"
    deterministic = 1
  }

  retry "neg" {
    max_attempts = -1
    multiplier   = "fast"
    on           = "transient"
  }

  task "extract" {
    command    = "./extract.sh"
    idempotent = "no"
    env        = ["MODE"]
    failover {
      per_worker = 1.5
      global     = -2
    }
  }

  task "empty" {
    command = []
  }

  check "counts" {
    input         = "raw"
    row_count_min = -1
    row_count_max = 1e30
    unique        = [["a"]]
    code_version_column = ""
  }
}
