pipeline "refs" {
  code_version = var.version

  task "extract" {
    command = ["./extract.sh", local.flag]
    timeout = upper("1m")
    retry   = null
    env     = { MODE = "${var.mode}" }
    outputs = [for x in ["a", "b"] : x]
    inputs  = concat(["a"], ["b"])
    pool    = 1 / 0
  }
}
