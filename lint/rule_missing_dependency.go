package lint

import "github.com/pipec/pipec/diag"

// ruleMissingDependency is reported by the compiler.
var ruleMissingDependency = Rule{
	ID:       "missing-dependency",
	Severity: diag.Error,
	Doc: `depends_on names no task; suggests the closest name

A depends_on entry names a task that does not exist.

The dependency would otherwise be dropped and the task would start before the
work it needs. The message suggests the closest task name.

Reported by the compiler; it cannot be disabled or suppressed.

Bad:

    pipeline "orders" {
      task "extract" {
        command = ["./extract.sh"]
      }
      task "clean" {
        command    = ["./clean.sh"]
        depends_on = ["extarct"]
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
