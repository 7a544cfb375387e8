pipeline "many" {
  task "a" {
    command = ["./a.sh"]
    timeout = = "1m"
  }

  task "b" {
    command = ["./b.sh"]
    outputs = [,]
  }

  task "d" {
    comand = ["./d.sh"]
  }

  check "c" {
    input = "x" "y"
  }
}
