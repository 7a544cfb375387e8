pipeline "w" {
  workers = 0
  task "a" {
    command = ["./a.sh"]
  }
  task "b" {
    command = ["./b.sh"]
  }
  workers = 3
}
