pipeline "p" {
  task "a" {
    command = ["./a.sh"]
    labels  = ["Spark", "gpu a100", "", "-x", "ok_1.2-3", "this-label-is-far-too-long-to-be-a-worker-label-because-it-goes-on"]
  }

  task "b" {
    command = ["./b.sh"]
    labels  = "spark"
  }
}
