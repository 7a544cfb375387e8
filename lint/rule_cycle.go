package lint

import "github.com/pipec/pipec/diag"

// ruleCycle is reported by the compiler.
var ruleCycle = Rule{
	ID:       "cycle",
	Severity: diag.Error,
	Doc: `a dependency cycle; the message lists the whole cycle a -> b -> c -> a

A dependency cycle between tasks, through depends_on or through artifacts.

A cycle can never start: every task in it waits for another. The message lists
the whole cycle, starting at its smallest task, and points at the edge that
leaves it, so the same cycle is reported the same way every time.

Reported by the compiler; it cannot be disabled or suppressed.

Bad:

    pipeline "orders" {
      task "extract" {
        command    = ["./extract.sh"]
        depends_on = ["clean"]
      }
      task "clean" {
        command    = ["./clean.sh"]
        depends_on = ["extract"]
      }
    }

Fixed:

    pipeline "orders" {
      task "extract" {
        command = ["./extract.sh"]
      }
      task "clean" {
        command    = ["./clean.sh"]
        depends_on = ["extract"]
      }
    }
`,
}
