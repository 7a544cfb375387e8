pipeline "unicode" {
  task "t" {
    command    = ["./résumé.sh", "→"]
    depends_on = ["ünï", "bad name"]
  }
}
