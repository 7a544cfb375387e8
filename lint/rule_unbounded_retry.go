package lint

import (
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/failover"
)

var ruleUnboundedRetry = Rule{
	ID:       "unbounded-retry",
	Severity: diag.Error,
	Doc: `attempts unlimited, or unlimited per-worker retries with failover configured

A retry policy with max_attempts = 0 (unlimited) and no max_elapsed, or a task
with failover whose retries never end.

A task that keeps failing is then retried forever: the run never fails, nobody is
alerted, and the task holds a slot for good. With failover configured it is
worse than it looks: the task retries on its first worker forever and never
fails over, so the failover limits are dead settings (docs/design.md section 6,
first worked case). A failover block with neither per_worker nor global moves
the task between workers forever.

When max_attempts is not written the default (3) applies, which is bounded.

Bad:

    pipeline "orders" {
      retry "forever" {
        max_attempts = 0
      }
      task "extract" {
        command = ["./extract.sh"]
        retry   = "forever"
        timeout = "20m"
        failover {
          per_worker = 2
          global     = 3
        }
      }
    }

Fixed:

    pipeline "orders" {
      retry "bounded" {
        max_attempts = 1
      }
      task "extract" {
        command = ["./extract.sh"]
        retry   = "bounded"
        timeout = "20m"
        failover {
          per_worker = 2
          global     = 3
        }
      }
    }
`,
	Run: runUnboundedRetry,
}

func runUnboundedRetry(pass *Pass) error {
	ix := pass.Index
	for i := range pass.Spec.Retries {
		r := &pass.Spec.Retries[i]
		if ix.Policies[r.Name] == r && RetriesForever(r) {
			pass.Reportf(r.At("max_attempts", r.NameRange),
				"retry policy %q has max_attempts = 0 (unlimited) and no max_elapsed: a task that keeps failing is retried forever and the run never fails; set max_attempts (e.g. 4) or max_elapsed", r.Name)
		}
	}
	for _, t := range ix.TaskList {
		if t.Failover == nil {
			continue
		}
		l, ok := failoverLimits(ix, t, pass.Workers)
		if !ok || failover.Outcome(l).End != failover.Forever {
			continue
		}
		if l.Attempts == 0 {
			pass.Reportf(t.Failover.Range,
				"task %q has failover configured, but its retry policy %q retries without limit on one worker, so the task never fails over (%s): bound the policy's max_attempts and the failover limits apply",
				t.Name, t.Retry.Name, failover.Simulate(l, 4))
			continue
		}
		pass.Reportf(t.Failover.Range,
			"task %q fails over between workers forever: its failover block sets neither per_worker nor global; set global to the failovers allowed before the job stops", t.Name)
	}
	return nil
}
