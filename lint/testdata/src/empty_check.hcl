pipeline "ec" {
  task "clean" {
    command = ["./clean.sh"]
    outputs = ["orders_clean"]
  }
  check "nothing" { // want "empty-check"
    input = "orders_clean"
  }
  check "by_command" {
    input   = "orders_clean"
    command = ["./audit.sh"]
  }
  check "bounded" {
    input         = "orders_clean"
    row_count_max = 0
  }
  sink "warehouse" {
    type = "directory"
    path = "warehouse/ec"
  }
  publish "mart" {
    artifact = "orders_clean"
    sink     = "warehouse"
  }
}
