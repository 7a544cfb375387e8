pipeline "hl" {
  retry "default" {
    max_attempts = 3
    on           = ["timeout"]
  }
  task "short" {
    command = ["./x.sh"]
    timeout = "10m"
    heartbeat {
      every = "30s"
      lease = "60s" // want "heartbeat-lease"
    }
  }
  task "ok" {
    command = ["./x.sh"]
    timeout = "10m"
    heartbeat {
      every = "10s"
      lease = "60s"
    }
  }
  task "hung" {
    command = ["./x.sh"]
    retry   = "default" // want "heartbeat-lease"
  }
  # Near miss: not retried, so no timeout is needed for retries.
  task "plain" {
    command = ["./x.sh"]
  }
}
