pipeline "broken" {
  task "extract" {
    command = [./extract.sh"]
    outputs = ["raw"]
  }

  task "clean" {
    command = ["./clean.sh"
  }
