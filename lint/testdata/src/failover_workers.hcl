# The worker pool is the spec's to state (workers = N); without it, only limits
# wrong for every pool size are reported.
pipeline "fw" {
  workers = 3
  retry "once" {
    max_attempts = 1
  }
  # Right on 3 workers with 2 starts each: 3 × 2 − 1 failovers.
  task "exact" {
    command = ["./x.sh"]
    retry   = "once"
    timeout = "1m"
    failover {
      per_worker = 2
      global     = 5
    }
  }
  # The worked case's global = 3 stops early on 3 workers.
  task "short" {
    command = ["./x.sh"]
    retry   = "once"
    timeout = "1m"
    failover {
      per_worker = 2
      global     = 3 // want "failover-limits: on 3 workers"
    }
  }
  # Labels without a described pool: judged on all 3 workers (3 × 2 − 1),
  # and no worker is assumed to lack tpu.
  task "labelled" {
    command = ["./x.sh"]
    retry   = "once"
    timeout = "1m"
    labels  = ["tpu"]
    failover {
      per_worker = 2
      global     = 5
    }
  }
}
