pipeline "sl" {
  task "load" {
    command = ["./load.sh", "postgres://loader:hunter2@db/orders"] // want "secret-literal"
    env = {
      WAREHOUSE_PASSWORD = "hunter2" // want "secret-literal"
      API_TOKEN          = "$${API_TOKEN}"
      GITHUB_TOKEN       = "$GITHUB_TOKEN"
      TOKEN_TTL          = "3600"
      SORT_KEY           = "order_id"
      AWS_KEY_ID         = "AKIAIOSFODNN7EXAMPLE" // want "secret-literal"
      MODE               = "full"
    }
    secret_env = ["DB_PASSWORD"]
  }
  # Near misses: references to environment variables.
  task "ref" {
    command = ["./x.sh", "postgres://loader:$${DB_PASSWORD}@db/orders", "--password", "$DB_PASSWORD"]
  }
  task "flag" {
    command = ["./x.sh", "--api-key=abc123"] // want "secret-literal"
  }
  task "pem" {
    command = ["./x.sh"]
    env = {
      CERT = "-----BEGIN RSA PRIVATE KEY-----" // want "secret-literal"
    }
  }
  sink "db" {
    type    = "jdbc"
    path    = "jdbc:postgresql://u:pw@host/db" // want "secret-literal"
    fencing = "token"
  }
}
