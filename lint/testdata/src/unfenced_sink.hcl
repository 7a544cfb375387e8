pipeline "us" {
  retry "default" {
    max_attempts = 3
    on           = ["timeout"]
  }
  task "a" {
    command = ["./a.sh"]
    outputs = ["a"]
    retry   = "default"
    timeout = "5m"
  }
  task "b" {
    command    = ["./b.sh"]
    outputs    = ["b"]
    idempotent = true
    timeout    = "5m"
  }
  task "c" {
    command = ["./c.sh"]
    outputs = ["c"]
    timeout = "5m"
  }
  check "a_ok" {
    input         = "a"
    row_count_min = 1
  }
  check "b_ok" {
    input         = "b"
    row_count_min = 1
  }
  check "c_ok" {
    input         = "c"
    row_count_min = 1
  }
  sink "lake" {
    type    = "s3"
    path    = "s3://lake/us"
    fencing = "none"
  }
  sink "lake_b" {
    type    = "s3"
    path    = "s3://lake/us-b"
    fencing = "none"
  }
  # Not fenced by default: only a directory sink is.
  sink "jdbc" {
    type = "jdbc"
    path = "warehouse"
  }
  sink "dir" {
    type = "directory"
    path = "warehouse/us"
  }
  publish "a_lake" {
    artifact = "a"
    sink     = "lake" // want "unfenced-sink"
  }
  # Near miss: declared idempotent and not retried.
  publish "b_lake" {
    artifact = "b"
    sink     = "lake_b"
  }
  publish "c_jdbc" {
    artifact = "c"
    sink     = "jdbc" // want "unfenced-sink"
  }
  publish "a_dir" {
    artifact = "a"
    sink     = "dir"
  }
}
