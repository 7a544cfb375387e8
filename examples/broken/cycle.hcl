# cycle: a -> b -> c -> a through depends_on and artifact flow; reported once, with the whole cycle.
pipeline "cycle" {
  task "a" {
    command    = ["true"]
    depends_on = ["c"]
    outputs    = ["x"]
  }
  task "b" {
    command = ["true"]
    inputs  = ["x"]
    outputs = ["y"]
  }
  task "c" {
    command = ["true"]
    inputs  = ["y"]
  }
}
