pipeline "values" {
  schedule {
    every = "daily"
    start = "2024-01-01"
  }

  retry "default" {
    initial     = "0s"
    max_delay   = "-1m"
    max_elapsed = "1 hour"
    jitter      = "random"
    on          = ["transient", "bad name"]
  }

  task "1extract" {
    command    = ["./extract.sh"]
    inputs     = ["raw@x", "raw@", "@-1", "ok@-1"]
    outputs    = ["raw/orders"]
    depends_on = [""]
    env        = { "MY-VAR" = "x", OK = "y" }
    secret_env = ["API KEY"]
    effects    = ["send mail"]
    retry      = "default policy"
    pool       = "3"
    timeout    = "forever"
    heartbeat {
      every = "10"
      lease = "1m"
    }
  }

  sink "out" {
    type    = "directory"
    path    = "out"
    fencing = "lock"
  }

  publish "p" {
    artifact = "a.b"
    sink     = "out sink"
  }
}
