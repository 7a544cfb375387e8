package lint

import "github.com/pipec/pipec/diag"

// ruleSchema is reported by the loaders and the compiler.
var ruleSchema = Rule{
	ID:       "schema",
	Severity: diag.Error,
	Doc: `unknown field, wrong type, bad duration, missing required field or undefined name

A field the spec does not define, a value of the wrong type, a duration or
timestamp that does not parse, a missing required field, or a reference to a
retry policy, pool, sink or error class that is not defined.

A misspelt field is an error rather than a silently ignored setting: "retires"
instead of "retry" would otherwise run the task without any retry at all.
Undefined names come with the closest defined name as a suggestion.

Reported by the loaders and the compiler; it cannot be disabled or suppressed.

Bad:

    pipeline "orders" {
      task "extract" {
        command = ["./extract.sh"]
        timeout = "20 minutes"
      }
    }

Fixed:

    pipeline "orders" {
      task "extract" {
        command = ["./extract.sh"]
        timeout = "20m"
      }
    }
`,
}
