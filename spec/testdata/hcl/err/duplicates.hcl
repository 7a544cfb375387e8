pipeline "dups" {
  code_version = "1"
  code_version = "2"

  schedule {
    every = "24h"
  }

  schedule {
    every = "1h"
  }

  retry_budget {
    min = 1
  }

  retry_budget {
    min = 2
  }

  task "extract" {
    command = ["./extract.sh"]
    command = ["./other.sh"]
    env     = { MODE = "a", MODE = "b" }
    heartbeat {
      every = "10s"
      lease = "60s"
    }
    heartbeat {
      every = "20s"
      lease = "60s"
    }
    failover {
      global = 1
    }
    failover {
      global = 2
    }
  }

  task "extract" {
    command = ["./again.sh"]
  }

  sink "out" {
    type = "directory"
    path = "out"
  }

  sink "out" {
    type = "directory"
    path = "out2"
  }
}
