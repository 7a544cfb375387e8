pipeline "x" {
  task "a" {
    command = ["ÿş"]
  }
