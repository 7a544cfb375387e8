pipeline "la" {
  # The shared artifact store on one worker's disk: reported once, here.
  artifacts = "/tmp/pipec-artifacts" // want "local-artifact"
  task "extract" {
    command = ["./extract.sh", "--out", "/tmp/raw.csv"] // want "local-artifact"
  }
  task "env" {
    command = ["./x.sh"]
    env = {
      SCRATCH = "/dev/shm/x" // want "local-artifact"
      DATA    = "data/in"
    }
  }
  task "flag" {
    command = ["./x.sh", "--out=/var/tmp/y"] // want "local-artifact"
  }
  # Inside the artifact store: its mistake is reported on artifacts alone.
  task "store" {
    command = ["./x.sh", "--in", "/tmp/pipec-artifacts/la/raw"]
    env = {
      ARTS = "/tmp/pipec-artifacts/"
    }
  }
  # Near miss: /tmpfiles is not /tmp.
  task "ok" {
    command = ["./x.sh", "--dir", "/tmpfiles/x"]
  }
  sink "up" {
    type = "directory"
    path = "../warehouse" // want "local-artifact"
  }
  sink "tmp" {
    type = "directory"
    path = "/tmp/warehouse" // want "local-artifact"
  }
  # Near misses: a path that stays inside the workspace, and an object store.
  sink "inside" {
    type = "directory"
    path = "warehouse/../warehouse2"
  }
  sink "s3" {
    type    = "s3"
    path    = "s3://bucket/tmp/x"
    fencing = "token"
  }
}
