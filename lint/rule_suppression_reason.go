package lint

import "github.com/pipec/pipec/diag"

// ruleSuppressionReason is reported by the suppression scan (suppress.go).
var ruleSuppressionReason = Rule{
	ID:       "suppression-reason",
	Severity: diag.Warning,
	Doc: `a pipec:ignore comment that gives no reason

The reason is the text after the rule id ("pipec:ignore RULE reason"). The
comment still suppresses the finding: refusing it would only show the same
problem twice. But a suppression is a decision someone must be able to review
later, and the reason is the review. Write why the finding does not apply.

Bad:

    pipeline "orders" {
      sink "lake" {
        type    = "s3"
        path    = "s3://lake/orders"
        fencing = "none"
      }
      task "clean" {
        command = ["./clean.sh"]
        outputs = ["orders_clean"]
      }
      check "orders_clean_ok" {
        input         = "orders_clean"
        row_count_min = 1
      }
      publish "orders_lake" {
        artifact = "orders_clean"
        sink     = "lake" // pipec:ignore unfenced-sink
      }
    }

Fixed:

    pipeline "orders" {
      sink "lake" {
        type    = "s3"
        path    = "s3://lake/orders"
        fencing = "none"
      }
      task "clean" {
        command = ["./clean.sh"]
        outputs = ["orders_clean"]
      }
      check "orders_clean_ok" {
        input         = "orders_clean"
        row_count_min = 1
      }
      publish "orders_lake" {
        artifact = "orders_clean"
        sink     = "lake" // pipec:ignore unfenced-sink the lake table is rebuilt from scratch each run
      }
    }
`,
	Run: func(*Pass) error { return nil },
}
