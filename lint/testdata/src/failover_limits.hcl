# The four worked cases of docs/design.md section 6, on the 2 workers the spec states.
pipeline "fl" {
  workers = 2
  retry "unlimited" {
    max_attempts = 0 // want "unbounded-retry"
    on           = ["timeout"]
  }
  retry "once" {
    max_attempts = 1
  }
  task "case1" {
    command = ["./x.sh"]
    timeout = "1m"
    retry   = "unlimited"
    failover { // want "unbounded-retry"
      per_worker = 2
      global     = 3
    }
  }
  task "case2" {
    command = ["./x.sh"]
    timeout = "1m"
    retry   = "once"
    failover {
      per_worker = 2
      global     = 3
    }
  }
  task "case3" {
    command = ["./x.sh"]
    timeout = "1m"
    retry   = "once"
    failover {
      per_worker = 2
      global     = 2 // want "failover-limits"
    }
  }
  task "case4" {
    command = ["./x.sh"]
    timeout = "1m"
    retry   = "once"
    failover {
      per_worker = 2
      global     = 4 // want "failover-limits"
    }
  }
  task "never_fails_over" {
    command = ["./x.sh"]
    timeout = "1m"
    failover {
      global = 0 // want "failover-limits"
    }
  }
  # No global limit: waiting for a worker is the design, not a mistake.
  task "no_global" {
    command = ["./x.sh"]
    timeout = "1m"
    failover {
      per_worker = 2
    }
  }
}
