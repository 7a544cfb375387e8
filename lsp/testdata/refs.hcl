pipeline "p" {
  pool "small" { slots = 1 }
  error "flaky" { exit_codes = [75] }
  retry "gentle" {
    max_attempts = 2
    on = ["flaky", "timeout"]
  }
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw"]
    retry = "gentle"
    pool = "small"
  }
  task "clean" {
    command = ["./clean.sh"]
    inputs = ["raw", "clean_out@-1"]
    outputs = ["clean_out"]
    depends_on = ["extract"]
  }
  check "ok" {
    input = "clean_out"
    row_count_min = 1
  }
  sink "wh" {
    type = "directory"
    path = "warehouse_dir"
  }
  publish "mart" {
    artifact = "clean_out"
    sink = "wh"
  }
}
