pipeline "broken" {
  task "a" {
    command    = ["./a.sh"]
    depends_on = ["b"]
  }
  task "b" {
    command    = ["./b.sh"]
    depends_on = ["a"]
  }
}
