package lint

import "github.com/pipec/pipec/diag"

var ruleEmptyCheck = Rule{
	ID:       "empty-check",
	Severity: diag.Error,
	Summary:  "a check asserts nothing (flipping a status is not validation)",
	Doc: `A check that asserts nothing: no row count bound, no unique, not_null or
columns list, and no command.

Such a check always accepts, so the publish it gates looks validated while
nothing was verified. Flipping a status is not validation.

Bad:

    pipeline "orders" {
      task "clean" {
        command = ["./clean.sh"]
        outputs = ["orders_clean"]
      }
      check "orders_clean_ok" {
        input = "orders_clean"
      }
    }

Fixed:

    pipeline "orders" {
      task "clean" {
        command = ["./clean.sh"]
        outputs = ["orders_clean"]
      }
      check "orders_clean_ok" {
        input         = "orders_clean"
        row_count_min = 1
        not_null      = ["order_id"]
      }
    }
`,
	Run: func(pass *Pass) error {
		seen := map[string]bool{}
		for i := range pass.Spec.Checks {
			c := &pass.Spec.Checks[i]
			if seen[c.Name] {
				continue
			}
			seen[c.Name] = true
			if !c.Asserts() {
				pass.Reportf(c.NameRange, "check %q asserts nothing about %q, so it accepts any data: add row_count_min, row_count_max, unique, not_null, columns or command",
					c.Name, c.Input.Name)
			}
		}
		return nil
	},
}
