# The pool, as a .pipec.yaml workers list would describe it:
# lint-workers: spark spark,gpu - arm
# (w1 offers spark, w2 spark and gpu, w3 nothing, w4 arm.) A labelled task is
# judged on the workers offering its labels.
pipeline "fl" {
  retry "once" {
    max_attempts = 1
  }
  # Right on w1 and w2 with 2 starts each: 2 × 2 − 1 (on all 4 workers it
  # would stop early).
  task "spark_exact" {
    command = ["./x.sh"]
    retry   = "once"
    timeout = "1m"
    labels  = ["spark"]
    failover {
      per_worker = 2
      global     = 3
    }
  }
  task "spark_short" {
    command = ["./x.sh"]
    retry   = "once"
    timeout = "1m"
    labels  = ["spark"]
    failover {
      per_worker = 2
      global     = 2 // want "failover-limits: on the 2 of 4 workers offering labels spark [(]w1, w2[)].*w1, w2, w1, then stopped"
    }
  }
  # Only w2 offers gpu: one worker, 2 starts, 1 failover at most.
  task "gpu_waits" {
    command = ["./x.sh"]
    retry   = "once"
    timeout = "1m"
    labels  = ["gpu"]
    failover {
      per_worker = 2
      global     = 3 // want "failover-limits: never reached on the 1 of 4 workers offering labels gpu [(]w2[)].*every worker offering its labels is exhausted"
    }
  }
  # No labels: the whole pool, 4 × 1 − 1.
  task "anywhere" {
    command = ["./x.sh"]
    retry   = "once"
    timeout = "1m"
    failover {
      per_worker = 1
      global     = 3
    }
  }
  task "nowhere" {
    command = ["./x.sh"]
    timeout = "1m"
    labels  = ["tpu", "spark"] // want "failover-limits: requires labels spark,tpu, but none of the 4 declared workers offers tpu"
  }
  task "apart" {
    command = ["./x.sh"]
    timeout = "1m"
    labels  = ["arm", "gpu"] // want "failover-limits: no single worker of the 4 declared offers all of arm,gpu"
  }
  # Offered by w2: no finding without failover limits.
  task "both" {
    command = ["./x.sh"]
    timeout = "1m"
    labels  = ["spark", "gpu"]
  }
}
