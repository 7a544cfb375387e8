package lint

import (
	"fmt"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
)

var ruleIntervalMismatch = Rule{
	ID:       "interval-mismatch",
	Severity: diag.Error,
	Doc: `an input binds an interval the schedule cannot provide, or a dependency satisfied only from another interval

A dependency is satisfied by an accepted artifact of a known interval. An
input at a positive offset ("raw@+1") reads a future interval, which no run has
produced when this one runs: the task would wait forever. Any offset needs a
schedule with an interval length (every), or there is no "previous interval".
And a task that depends_on another task but reads that task's outputs only at
another interval ("raw@-1") is gated by this interval's run of the task while
using other data: a green task of one interval standing in for the data of
another. Read the artifact of this interval, or drop the depends_on.

Bad:

    pipeline "orders" {
      schedule {
        every = "24h"
        start = "2024-01-01T00:00:00Z"
      }
      task "extract" {
        command = ["./extract.sh"]
        outputs = ["raw_orders"]
      }
      task "clean" {
        command    = ["./clean.sh"]
        inputs     = ["raw_orders@-1"]
        depends_on = ["extract"]
        outputs    = ["orders_clean"]
      }
    }

Fixed:

    pipeline "orders" {
      schedule {
        every = "24h"
        start = "2024-01-01T00:00:00Z"
      }
      task "extract" {
        command = ["./extract.sh"]
        outputs = ["raw_orders"]
      }
      task "clean" {
        command = ["./clean.sh"]
        inputs  = ["raw_orders", "raw_orders@-1"]
        outputs = ["orders_clean"]
      }
    }
`,
	Run: runIntervalMismatch,
}

func runIntervalMismatch(pass *Pass) error {
	ix := pass.Index
	sched := pass.Spec.Schedule
	for _, t := range ix.TaskList {
		for _, in := range t.Inputs {
			name := spec.InputString(in.Artifact, in.Offset)
			switch {
			case in.Offset > 0:
				pass.Reportf(in.Range, "task %q reads %q, interval %+d: a future interval, which no run has produced when this one runs, so the task would wait forever; read %q or an earlier interval",
					t.Name, name, in.Offset, in.Artifact)
			case in.Offset < 0 && sched == nil:
				pass.Reportf(in.Range, "task %q reads %q, interval %d, but the pipeline has no schedule, so there is no previous interval; add a schedule with every, or read %q",
					t.Name, name, in.Offset, in.Artifact)
			case in.Offset < 0 && sched.Every == 0 && !sched.Refused("every"):
				pass.Reportf(in.Range, "task %q reads %q, interval %d, but the schedule has no every, so intervals have no length; set every",
					t.Name, name, in.Offset)
			}
		}
		if !readsOtherInterval(t) {
			continue
		}
		for _, d := range t.DependsOn {
			dep := ix.Tasks[d.Name]
			if dep == nil {
				continue // missing-dependency
			}
			if other, ok := onlyOtherInterval(t, dep); ok {
				pass.Reportf(d.Range, "task %q depends on %q of this interval but reads its output only from another interval (%s): the dependency is satisfied by this interval's %q while the data comes from another; read %q or drop %q from depends_on",
					t.Name, d.Name, other, d.Name, otherArtifact(t, dep), d.Name)
			}
		}
	}
	return nil
}

// onlyOtherInterval reports whether t reads some output of dep, and only at
// offsets other than 0; it returns the first such input as written.
func onlyOtherInterval(t, dep *spec.Task) (string, bool) {
	first := ""
	for _, in := range t.Inputs {
		for _, o := range dep.Outputs {
			if o.Name != in.Artifact {
				continue
			}
			if in.Offset == 0 {
				return "", false
			}
			if first == "" {
				first = fmt.Sprintf("%q", spec.InputString(in.Artifact, in.Offset))
			}
		}
	}
	return first, first != ""
}

// otherArtifact is the first of dep's outputs that t reads.
func otherArtifact(t, dep *spec.Task) string {
	for _, in := range t.Inputs {
		for _, o := range dep.Outputs {
			if o.Name == in.Artifact {
				return in.Artifact
			}
		}
	}
	return ""
}

// readsOtherInterval reports whether any input of t has an offset.
func readsOtherInterval(t *spec.Task) bool {
	for _, in := range t.Inputs {
		if in.Offset != 0 {
			return true
		}
	}
	return false
}
