# missing-dependency: depends_on names a task that does not exist; pipec suggests the closest name.
pipeline "typo" {
  task "extract" {
    command = ["true"]
  }
  task "load" {
    command    = ["true"]
    depends_on = ["extrct"]
  }
}
