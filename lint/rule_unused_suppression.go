package lint

import "github.com/pipec/pipec/diag"

// ruleUnusedSuppression is reported by the suppression scan after every rule
// ran (suppress.go); its Run does nothing, so it can be disabled like any rule.
var ruleUnusedSuppression = Rule{
	ID:       "unused-suppression",
	Severity: diag.Warning,
	Doc: `a pipec:ignore comment that suppresses nothing or names an unknown rule

A "pipec:ignore RULE reason" comment that suppresses nothing: no finding of
RULE on the line it covers, a rule id that does not exist, or a rule that
cannot be suppressed (those the compiler reports).

A suppression comment covers the line it ends (after code), or, alone on its
line, the next line that is not a comment line (so several can stack above one
line; a blank line in between leaves it covering nothing). It is written
with // (HCL and CUE) or # (HCL only), and may name several rules separated by
commas. A stale suppression hides the next real problem on that line, so it is
reported once the finding it silenced is gone. A comment naming a rule turned
off with --disable is not reported.

Bad:

    pipeline "orders" {
      task "extract" {
        command = ["./extract.sh"]
        timeout = "20m" // pipec:ignore heartbeat-lease no heartbeat here
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
	Run: func(*Pass) error { return nil },
}
