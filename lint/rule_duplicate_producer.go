package lint

import "github.com/pipec/pipec/diag"

// ruleDuplicateProducer is reported by the compiler.
var ruleDuplicateProducer = Rule{
	ID:       "duplicate-producer",
	Severity: diag.Error,
	Doc: `two tasks output the same artifact (concurrent writers)

Two writers of one artifact race each other: which version a reader gets depends
on timing, and neither can be fenced against the other. Give each task its own
output. The finding points at the second declaration and names the first.

Reported by the compiler; it cannot be disabled or suppressed.

Bad:

    pipeline "orders" {
      task "extract_eu" {
        command = ["./extract.sh", "eu"]
        outputs = ["raw_orders"]
      }
      task "extract_us" {
        command = ["./extract.sh", "us"]
        outputs = ["raw_orders"]
      }
    }

Fixed:

    pipeline "orders" {
      task "extract_eu" {
        command = ["./extract.sh", "eu"]
        outputs = ["raw_orders_eu"]
      }
      task "extract_us" {
        command = ["./extract.sh", "us"]
        outputs = ["raw_orders_us"]
      }
    }
`,
}
