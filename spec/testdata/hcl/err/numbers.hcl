pipeline "numbers" {
  code_version = 1e99999999

  retry_budget {
    ratio = 1e99999999
    min   = 1.5e-99999999
  }

  pool "big" { slots = 1e99999999 }

  task "t" {
    command = ["./t.sh", "${1e99999999}", "a${1e99999999}", 2 * 3]
    timeout = -1
    env     = { (1e99999999) = "x", (2) = "y" }
    outputs = { (1e99999999) = "x" }
  }
}
