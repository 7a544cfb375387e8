# missing-artifact: an input names an artifact that no task outputs.
pipeline "orphan_input" {
  task "extract" {
    command = ["true"]
    outputs = ["raw_orders"]
  }
  task "clean" {
    command = ["true"]
    inputs  = ["raw_order"]
  }
}
