pipeline "missing" {
  task "extract" {
    outputs = ["raw"]
    heartbeat {
    }
  }

  check "raw_ok" {
    row_count_min = 1
  }

  sink "out" {
  }

  publish "p" {
  }
}
