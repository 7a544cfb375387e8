package lint

import "github.com/pipec/pipec/diag"

// ruleInputVariableCollision is reported by the compiler
// (compiler/inputvars.go).
var ruleInputVariableCollision = Rule{
	ID:       "input-variable-collision",
	Severity: diag.Error,
	Doc: `an artifact is named like the variable of an input of another interval

An artifact's name is the environment variable of an input at an interval
offset: raw_PREV beside raw@-1, raw_PREV2 beside raw@-2, raw_NEXT1 beside
raw@+1.

A task finds each input's version folder in PIPEC_INPUT_<artifact>, and an
input of another interval in PIPEC_INPUT_<artifact>_PREV (-1), _PREV<n> (-n)
or _NEXT<n> (+n). A task reading raw@-1 and an artifact named raw_PREV would
get both as PIPEC_INPUT_raw_PREV: one of them silently takes the other's
place, and the task reads the wrong interval's data (in either order of its
inputs). The compiler refuses the collision where a task reads both (at the
later input) and, since the name alone invites it, wherever an artifact is
named like an offset input's variable (at the output that declares it).
Rename the artifact.

Reported by the compiler; it cannot be disabled or suppressed.

Bad:

    pipeline "totals" {
      schedule {
        every = "24h"
        start = "2024-01-01T00:00:00Z"
      }
      task "extract" {
        command = ["./extract.sh"]
        outputs = ["raw", "raw_PREV"]
      }
      task "compare" {
        command = ["./compare.sh"]
        inputs  = ["raw@-1", "raw_PREV"]
        outputs = ["diff"]
      }
      publish "diff" {
        artifact = "diff"
        sink     = "marts"
      }
      sink "marts" {
        type = "directory"
        path = "marts"
      }
    }

Fixed:

    pipeline "totals" {
      schedule {
        every = "24h"
        start = "2024-01-01T00:00:00Z"
      }
      task "extract" {
        command = ["./extract.sh"]
        outputs = ["raw", "raw_baseline"]
      }
      task "compare" {
        command = ["./compare.sh"]
        inputs  = ["raw@-1", "raw_baseline"]
        outputs = ["diff"]
      }
      publish "diff" {
        artifact = "diff"
        sink     = "marts"
      }
      sink "marts" {
        type = "directory"
        path = "marts"
      }
    }
`,
}
