version = 2

pipeline "orders" {
  code_verison = "1"

  task "extract" {
    comand  = ["./extract.sh"]
    command = ["./extract.sh"]
    heartbeats {
      every = "10s"
    }
  }

  trigger "nightly" {}
}

locals {}
