# Near miss: an artifact store on shared storage, and one inside the
# workspace, are where every worker reads versions from; nothing to report,
# on 3 workers with one task reading another's output either.
pipeline "shared" {
  workers   = 3
  artifacts = "/mnt/shared/pipec/artifacts"
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw_orders"]
  }
  task "load" {
    command = ["./load.sh"]
    inputs  = ["raw_orders"]
  }
}
