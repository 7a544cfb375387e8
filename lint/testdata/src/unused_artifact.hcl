pipeline "ua" {
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw", "debug"] // want "unused-artifact"
  }
  # Reading at another interval uses the artifact.
  task "clean" {
    command = ["./clean.sh"]
    inputs  = ["raw@-1"]
    outputs = ["clean"]
  }
  # A check alone does not use an artifact.
  task "audit" {
    command = ["./audit.sh"]
    outputs = ["audited"] // want "unused-artifact"
  }
  check "audited_ok" {
    input         = "audited"
    row_count_min = 1
  }
  check "clean_ok" {
    input         = "clean"
    row_count_min = 1
  }
  sink "warehouse" {
    type = "directory"
    path = "warehouse/ua"
  }
  publish "clean_mart" {
    artifact = "clean"
    sink     = "warehouse"
  }
}
