pipeline "ni" {
  retry "default" {
    max_attempts = 3
    on           = ["timeout"]
  }
  retry "once" {
    max_attempts = 1
  }
  task "charge" {
    command = ["./charge.sh"]
    effects = ["charge"]
    timeout = "5m"
    retry   = "default" // want "non-idempotent-retry"
  }
  task "notify" {
    command    = ["./notify.sh"]
    idempotent = false
    timeout    = "5m"
    failover { // want "non-idempotent-retry"
      per_worker = 1
      global     = 1
    }
  }
  # Near miss: effects the author declares idempotent (an upsert).
  task "upsert" {
    command    = ["./upsert.sh"]
    effects    = ["write"]
    idempotent = true
    timeout    = "5m"
    retry      = "default"
  }
  # Near miss: not idempotent, but one attempt only.
  task "mail" {
    command = ["./mail.sh"]
    effects = ["mail"]
    timeout = "5m"
    retry   = "once"
  }
}
