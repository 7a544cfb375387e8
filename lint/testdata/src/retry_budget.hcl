# Near miss: five retried tasks under a retry budget.
pipeline "rb" {
  retry_budget {
    ratio = 0.2
    min   = 3
  }
  retry "good" {
    on = ["timeout"]
  }
  task "t1" {
    command = ["./x.sh"]
    timeout = "1m"
    retry   = "good"
  }
  task "t2" {
    command = ["./x.sh"]
    timeout = "1m"
    retry   = "good"
  }
  task "t3" {
    command = ["./x.sh"]
    timeout = "1m"
    retry   = "good"
  }
  task "t4" {
    command = ["./x.sh"]
    timeout = "1m"
    retry   = "good"
  }
  task "t5" {
    command = ["./x.sh"]
    timeout = "1m"
    retry   = "good"
  }
}
