package lint

import (
	"strings"

	"github.com/pipec/pipec/diag"
)

// holds agrees with the number of vacuous assertions listed.
func holds(n int) string {
	if n == 1 {
		return "holds"
	}
	return "hold"
}

var ruleEmptyCheck = Rule{
	ID:       "empty-check",
	Severity: diag.Error,
	Doc: `a check asserts nothing (flipping a status is not validation)

The assertions that count: row_count_min above 0, a row_count_max an artifact
can reach (below 2^50 rows), a non-empty unique, not_null or columns list, a
command, and a code_version_column. A check with none of them, or only with
forms that hold for any data (row_count_min = 0, a row_count_max of 2^50 rows
or more, empty unique, not_null or columns lists), is reported.

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
			if c.Asserts() {
				continue
			}
			if v := c.Vacuous(); len(v) > 0 {
				pass.Reportf(c.NameRange, "check %q cannot fail: %s %s for any data, so it accepts anything as %q; assert something data could break, such as row_count_min = 1 or unique = [\"id\"]",
					c.Name, strings.Join(v, " and "), holds(len(v)), c.Input.Name)
				continue
			}
			pass.Reportf(c.NameRange, "check %q asserts nothing about %q, so it accepts any data: add row_count_min, row_count_max, unique, not_null, columns, command or code_version_column",
				c.Name, c.Input.Name)
		}
		return nil
	},
}
