# Zero is a value: initial = "0s" and max_delay = "0s" are immediate retries
# (Airflow's and Prefect's default), which retry-storm reports; they are not
# schema errors. Where zero means nothing, schema says why.
pipeline "zero" {
  error "success" {
    exit_codes = [0] // want "schema"
  }
  retry "immediate" {
    max_attempts = 3
    initial      = "0s" // want "retry-storm: initial = .0s., so every retry starts at once"
    on           = ["timeout"]
  }
  retry "capped_at_zero" {
    max_attempts = 3
    initial      = "5s"
    max_delay    = "0s" // want "retry-storm: max_delay = .0s."
    on           = ["timeout"]
  }
  # Near miss: a zero initial delay that never retries cannot storm.
  retry "once" {
    max_attempts = 1
    initial      = "0s"
  }
  retry "no_time" {
    max_attempts = 3
    max_elapsed  = "0s" // want "schema"
    on           = ["timeout"]
  }
  task "a" {
    command = ["./a.sh"]
    retry   = "immediate"
    timeout = "0s" // want "schema: a zero timeout would end every attempt"
  }
  task "b" {
    command = ["./b.sh"]
    retry   = "capped_at_zero"
    timeout = "1m"
    heartbeat {
      every = "0s" // want "schema"
      lease = "0s" // want "schema"
    }
  }
  task "c" {
    command = ["./c.sh"]
    retry   = "once"
  }
}
