pipeline "one" {
  task "a" {
    command = ["./a.sh"]
  }
}

pipeline "two" {
  task "b" {
    command = ["./b.sh"]
  }
}
