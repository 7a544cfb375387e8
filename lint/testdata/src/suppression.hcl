pipeline "sup" {
  task "a" {
    command = ["./a.sh"]
    outputs = ["a_out"] // pipec:ignore unused-artifact kept for the debugging dashboard
  }
  task "b" {
    command = ["./b.sh"]
    # pipec:ignore unused-artifact the nightly export reads it outside pipec
    outputs = ["b_out"]
  }
  task "c" {
    command = ["./c.sh"]
    // pipec:ignore unused-artifact // want "suppression-reason"
    outputs = ["c_out"]
  }
  task "d" {
    command = ["./d.sh"] // pipec:ignore unused-artifact nothing on this line // want "unused-suppression"
    timeout = "1m"       // pipec:ignore retry-strom a typo // want "unused-suppression"
  }
  task "e" {
    // pipec:ignore cycle compiler findings cannot be suppressed // want "unused-suppression"
    command = ["./e.sh"]
  }
  task "f" {
    command = ["./f.sh"]
    // pipec:ignore unused-artifact,secret-literal one of two applies // want "unused-suppression"
    outputs = ["f_out"]
  }
  retry "default" {
    on = ["timeout"]
  }
  task "g" {
    command = ["./g.sh"]
    effects = ["mail"]
    // Two suppressions stacked above one line.
    // pipec:ignore non-idempotent-retry the mail step deduplicates by run id
    // pipec:ignore heartbeat-lease the mail server times out by itself
    retry = "default"
    env = {
      API_TOKEN = "test-fixture" // pipec:ignore secret-literal a public test fixture
    }
  }
  # Not a comment: inside a string.
  task "h" {
    command = ["echo", "// pipec:ignore unused-artifact"]
    outputs = ["h_out"] // want "unused-artifact"
  }
  task "i" {
    command = ["./i.sh"]
    env = {
      DB_PASSWORD = "x" // want "secret-literal"
    }
  }
  # pipec:ignore unused-artifact a blank line follows, so this covers nothing // want "unused-suppression"

  task "j" {
    command = ["./j.sh"]
  }
}
