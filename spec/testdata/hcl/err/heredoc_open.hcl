pipeline "h" {
  task "a" {
    command = ["./a.sh"]
    env = {
      NOTE = <<EOT
a heredoc whose closing marker is misspelt
  EOF
    }
  }
}
