# schema: an unknown field, a bad duration and a wrong type, each reported where it is written.
pipeline "shapes" {
  task "extract" {
    command = ["true"]
    timout  = "20m"
    timeout = "twenty minutes"
    outputs = "raw_orders"
  }
}
