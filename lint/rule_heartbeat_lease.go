package lint

import (
	"github.com/pipec/pipec/diag"
)

var ruleHeartbeatLease = Rule{
	ID:       "heartbeat-lease",
	Severity: diag.Warning,
	Doc: `a lease not longer than twice the heartbeat period, or a retried task with no timeout

A lease must survive one late or lost heartbeat: with lease <= 2 × every, a
single delayed renewal (a GC pause, a slow network) expires the lease, the
attempt becomes unknown and a second attempt is launched beside a healthy first
one. A retried task with no timeout is the opposite failure: a hung attempt
never fails, so it is never retried, and the run stalls with no alert.

Bad:

    pipeline "orders" {
      retry "default" {
        max_attempts = 3
      }
      task "extract" {
        command = ["./extract.sh"]
        retry   = "default"
        heartbeat {
          every = "30s"
          lease = "45s"
        }
      }
    }

Fixed:

    pipeline "orders" {
      retry "default" {
        max_attempts = 3
      }
      task "extract" {
        command = ["./extract.sh"]
        retry   = "default"
        timeout = "20m"
        heartbeat {
          every = "10s"
          lease = "60s"
        }
      }
    }
`,
	Run: runHeartbeatLease,
}

func runHeartbeatLease(pass *Pass) error {
	ix := pass.Index
	for _, t := range ix.TaskList {
		if h := t.Heartbeat; h != nil && h.Every > 0 && h.Lease > 0 && h.Lease <= 2*h.Every {
			pass.Reportf(h.At("lease", h.Range), "task %q has lease %s for heartbeats every %s: one late heartbeat expires the lease and a second attempt starts beside a live one; make the lease more than twice the period (e.g. %s)",
				t.Name, fmtDuration(h.Lease), fmtDuration(h.Every), fmtDuration(6*h.Every))
		}
		// A timeout the loader refused is present but invalid: schema
		// reports it, and "no timeout" would be a second finding for it.
		if r := ix.RetryingPolicy(t); r != nil && t.Timeout == 0 && !t.Refused("timeout") {
			pass.Reportf(t.Retry.Range, "task %q is retried by policy %q but has no timeout: a hung attempt never fails, so it is never retried and the run stalls; set timeout",
				t.Name, r.Name)
		}
	}
	return nil
}
