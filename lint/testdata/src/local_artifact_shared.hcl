# Near miss: an artifact store on shared storage, and one inside the
# workspace, are where every worker reads versions from; nothing to report.
pipeline "shared" {
  artifacts = "/mnt/shared/pipec/artifacts"
  task "extract" {
    command = ["./extract.sh"]
  }
}
