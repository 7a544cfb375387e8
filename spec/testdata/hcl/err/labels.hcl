pipeline {
  schedule "daily" {
    every = "24h"
  }

  task {
    command = ["./a.sh"]
  }

  task "a" "b" {
    command = ["./a.sh"]
  }

  task "ok" {
    command = ["./ok.sh"]
    failover "x" {
      global = 1
    }
  }
}
