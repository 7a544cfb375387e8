# An artifact store pipec cannot open: only a folder or s3:// is.
pipeline "elsewhere" {
  artifacts = "gs://bucket/pipec" # want "local-artifact: gs:// URL, which pipec cannot open"
  task "one" {
    command = ["./one.sh"]
  }
}
