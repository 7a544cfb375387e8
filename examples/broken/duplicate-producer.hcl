# duplicate-producer: two tasks write the same artifact, so their writes race.
pipeline "two_writers" {
  task "extract_eu" {
    command = ["true"]
    outputs = ["raw_orders"]
  }
  task "extract_us" {
    command = ["true"]
    outputs = ["raw_orders"]
  }
}
