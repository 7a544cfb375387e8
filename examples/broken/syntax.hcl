# syntax: an unclosed block; the file does not parse.
pipeline "unclosed" {
  task "extract" {
    command = ["true"]
