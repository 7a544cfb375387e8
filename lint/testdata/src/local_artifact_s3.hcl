# Object store locations: an s3:// artifact store is shared storage (no
# finding even on several workers); a location pipec cannot use as written is.
pipeline "lake" {
  workers   = 3
  artifacts = "s3://pipec-artifacts/lake"
  retry "default" {
    max_attempts = 3
    on           = ["timeout"]
  }
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw"]
    timeout = "5m"
  }
  task "clean" {
    command = ["./clean.sh"]
    inputs  = ["raw"]
    outputs = ["clean"]
    retry   = "default"
    timeout = "5m"
  }
  check "clean_ok" {
    input         = "clean"
    row_count_min = 1
  }
  # Fenced by the object store's conditional writes: no unfenced-sink.
  sink "mart" {
    type = "s3"
    path = "s3://lake/marts/clean"
  }
  sink "mart_unfenced" {
    type    = "s3"
    path    = "s3://lake/marts/clean-copy"
    fencing = "none"
  }
  sink "wrong_type" {
    type = "directory"
    path = "s3://lake/marts/other" # want "local-artifact: use type = \x22s3\x22"
  }
  sink "wrong_path" {
    type = "s3"
    path = "marts/clean" # want "local-artifact: not an s3:// URL"
  }
  publish "clean_mart" {
    artifact = "clean"
    sink     = "mart"
  }
  publish "clean_copy" {
    artifact = "clean"
    sink     = "mart_unfenced" // want "unfenced-sink: conditional writes are not used"
  }
  publish "clean_other" {
    artifact = "clean"
    sink     = "wrong_type"
  }
  publish "clean_wrong" {
    artifact = "clean"
    sink     = "wrong_path"
  }
}
