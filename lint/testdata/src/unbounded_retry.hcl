pipeline "ub" {
  retry "forever" {
    max_attempts = 0 // want "unbounded-retry"
    on           = ["timeout"]
  }
  # Near misses: bounded by time, and the default of 3 attempts.
  retry "timed" {
    max_attempts = 0
    max_elapsed  = "1h"
    on           = ["timeout"]
  }
  retry "default" {
    on = ["timeout"]
  }
  task "a" {
    command = ["./a.sh"]
    timeout = "1m"
    retry   = "forever"
    failover { // want "unbounded-retry"
      per_worker = 2
      global     = 3
    }
  }
  task "b" {
    command = ["./b.sh"]
    timeout = "1m"
    failover { // want "unbounded-retry"
      per_worker = 0
    }
  }
  task "c" {
    command = ["./c.sh"]
    timeout = "1m"
    retry   = "timed"
    failover {
      per_worker = 2
      global     = 3
    }
  }
  task "d" {
    command = ["./d.sh"]
    timeout = "1m"
    retry   = "default"
  }
}
