pipeline "s" {
  task "a" {
    command = ["./a.sh]
    outputs = ["a"]
  }
  task "b" {
    command = ["./b.sh"]
    inputs  = ["a"]
  }
}
