pipeline "rs" { // want "retry-storm"
  retry "flat" {
    max_attempts = 3
    multiplier   = 1      // want "retry-storm"
    jitter       = "none" // want "retry-storm"
    on           = ["timeout"]
  }
  retry "good" {
    max_attempts = 3
    initial      = "10s"
    max_delay    = "10m"
    multiplier   = 2
    jitter       = "full"
    on           = ["timeout"]
  }
  # Near miss: a policy that retries nothing cannot storm.
  retry "once" {
    max_attempts = 1
    multiplier   = 1
    jitter       = "none"
  }
  task "t1" {
    command = ["./x.sh"]
    timeout = "1m"
    retry   = "good"
  }
  task "t2" {
    command = ["./x.sh"]
    timeout = "1m"
    retry   = "good"
  }
  task "t3" {
    command = ["./x.sh"]
    timeout = "1m"
    retry   = "good"
  }
  task "t4" {
    command = ["./x.sh"]
    timeout = "1m"
    retry   = "flat"
  }
  task "t5" {
    command = ["./x.sh"]
    timeout = "1m"
    retry   = "good"
  }
  task "t6" {
    command = ["./x.sh"]
    timeout = "1m"
    retry   = "once"
  }
}
