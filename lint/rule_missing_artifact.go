package lint

import "github.com/pipec/pipec/diag"

// ruleMissingArtifact is reported by the compiler.
var ruleMissingArtifact = Rule{
	ID:       "missing-artifact",
	Severity: diag.Error,
	Doc: `an input, check or publish names an artifact nothing produces

A task reading such an artifact can never start (its input never gets an
accepted version), a check of it has nothing to audit, and a publish of it has
nothing to publish. The message
suggests the closest artifact name.

Reported by the compiler; it cannot be disabled or suppressed.

Bad:

    pipeline "orders" {
      task "extract" {
        command = ["./extract.sh"]
        outputs = ["raw_orders"]
      }
      task "clean" {
        command = ["./clean.sh"]
        inputs  = ["raw_order"]
      }
    }

Fixed:

    pipeline "orders" {
      task "extract" {
        command = ["./extract.sh"]
        outputs = ["raw_orders"]
      }
      task "clean" {
        command = ["./clean.sh"]
        inputs  = ["raw_orders"]
      }
    }
`,
}
