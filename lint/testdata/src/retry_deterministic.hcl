pipeline "rd" {
  error "schema" {
    exit_codes    = [65]
    deterministic = true
  }
  error "transient" {
    exit_codes = [75]
  }
  retry "bad" {
    max_attempts = 3
    on           = ["transient", "schema"] // want "retry-deterministic"
  }
  retry "everything" { // want "retry-deterministic"
    max_attempts = 3
  }
  # Near miss: only transient classes, built-in ones included.
  retry "good" {
    max_attempts = 3
    on           = ["transient", "timeout"]
  }
  # Near miss: one attempt retries nothing.
  retry "once" {
    max_attempts = 1
    on           = ["schema"]
  }
}
