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
  # Checks that cannot fail assert nothing either.
  check "min_zero" { // want "empty-check: cannot fail: row_count_min = 0 holds for any data"
    input         = "orders_clean"
    row_count_min = 0
  }
  check "empty_lists" { // want "empty-check"
    input    = "orders_clean"
    unique   = []
    not_null = []
    columns  = []
  }
  check "unreachable_max" { // want "empty-check"
    input         = "orders_clean"
    row_count_min = 0
    row_count_max = 9007199254740993
  }
  # Near misses: one real assertion makes the check able to fail.
  check "min_zero_and_unique" {
    input         = "orders_clean"
    row_count_min = 0
    unique        = ["order_id"]
  }
  check "large_but_reachable" {
    input         = "orders_clean"
    row_count_max = 1000000000000
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
