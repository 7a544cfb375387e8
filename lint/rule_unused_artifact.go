package lint

import "github.com/pipec/pipec/diag"

var ruleUnusedArtifact = Rule{
	ID:       "unused-artifact",
	Severity: diag.Info,
	Doc: `an artifact that nothing reads or publishes

An artifact that no task reads (at any interval) and no publish makes visible.

Every artifact is staged, audited and stored per attempt: one nobody uses costs
storage and time, and often means a typo elsewhere (an input or publish that
names a similar artifact) or a forgotten publish. A check alone does not use
an artifact: auditing data nobody consumes protects nobody.

Bad:

    pipeline "orders" {
      task "extract" {
        command = ["./extract.sh"]
        outputs = ["raw_orders", "raw_debug"]
      }
      task "clean" {
        command = ["./clean.sh"]
        inputs  = ["raw_orders"]
        outputs = ["orders_clean"]
      }
      check "orders_clean_ok" {
        input         = "orders_clean"
        row_count_min = 1
      }
      sink "warehouse" {
        type = "directory"
        path = "warehouse/orders"
      }
      publish "orders_mart" {
        artifact = "orders_clean"
        sink     = "warehouse"
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
        outputs = ["orders_clean"]
      }
      check "orders_clean_ok" {
        input         = "orders_clean"
        row_count_min = 1
      }
      sink "warehouse" {
        type = "directory"
        path = "warehouse/orders"
      }
      publish "orders_mart" {
        artifact = "orders_clean"
        sink     = "warehouse"
      }
    }
`,
	Run: func(pass *Pass) error {
		ix := pass.Index
		if ix.RefusedArtifactRef {
			return nil
		}
		for _, t := range ix.TaskList {
			for _, o := range t.Outputs {
				if ix.Producer[o.Name] != t || len(ix.Readers[o.Name]) > 0 || len(ix.Publishes[o.Name]) > 0 {
					continue
				}
				pass.Reportf(o.Range, "artifact %q of task %q is never read or published: remove it from outputs, or read or publish it", o.Name, t.Name)
			}
		}
		return nil
	},
}
