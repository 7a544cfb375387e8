# A workers value the loader refuses is reported once, by schema; the pool size
# is then unknown, and only limits wrong for every pool size are reported.
pipeline "fu" {
  workers = 0 // want "schema"
  retry "once" {
    max_attempts = 1
  }
  task "two" {
    command = ["./x.sh"]
    retry   = "once"
    timeout = "1m"
    failover {
      per_worker = 2
      global     = 3
    }
  }
  task "never" {
    command = ["./x.sh"]
    retry   = "once"
    timeout = "1m"
    failover {
      per_worker = 3
      global     = 1 // want "failover-limits"
    }
  }
}
