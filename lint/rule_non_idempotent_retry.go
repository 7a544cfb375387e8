package lint

import (
	"fmt"
	"strings"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
)

var ruleNonIdempotentRetry = Rule{
	ID:       "non-idempotent-retry",
	Severity: diag.Error,
	Doc: `a task with non-idempotent effects is retried

A task that is not idempotent (idempotent = false, or effects declared without
idempotent = true) has a retry policy that retries, or a failover block.

A retry or a failover runs the task again, and every run repeats its side
effects: a second charge, a second notification, a duplicated row in a table
that is not the task's output. The runtime never retries such a task, so the
policy is also misleading. Make the effect idempotent (an idempotency key, an
upsert) and declare idempotent = true, or remove the retry.

Bad:

    pipeline "orders" {
      retry "default" {
        max_attempts = 4
      }
      task "charge" {
        command = ["./charge.sh"]
        effects = ["charge"]
        retry   = "default"
        timeout = "5m"
      }
    }

Fixed:

    pipeline "orders" {
      retry "default" {
        max_attempts = 4
      }
      task "charge" {
        command    = ["./charge.sh", "--idempotency-key", "run"]
        effects    = ["charge"]
        idempotent = true
        retry      = "default"
        timeout    = "5m"
      }
    }
`,
	Run: runNonIdempotentRetry,
}

func runNonIdempotentRetry(pass *Pass) error {
	ix := pass.Index
	for _, t := range ix.TaskList {
		// An idempotent value the loader refused is not judged: the author
		// said something, and schema reports what.
		if t.IsIdempotent() || t.Refused("idempotent") {
			continue
		}
		why := nonIdempotentWhy(t)
		if r := ix.RetryingPolicy(t); r != nil {
			attempts := "without limit"
			switch n := MaxAttempts(r); {
			case n == Unknown:
				attempts = "max_attempts as written"
			case n > 0:
				attempts = fmt.Sprintf("up to %d attempts", n)
			}
			pass.Reportf(t.Retry.Range, "task %q is retried by policy %q (%s) but is not idempotent (%s): each retry repeats its side effects; make it idempotent and declare idempotent = true, or remove retry",
				t.Name, r.Name, attempts, why)
		}
		if t.Failover != nil {
			pass.Reportf(t.Failover.Range, "task %q fails over to other workers but is not idempotent (%s): each start repeats its side effects; make it idempotent and declare idempotent = true, or remove failover",
				t.Name, why)
		}
	}
	return nil
}

func nonIdempotentWhy(t *spec.Task) string {
	var parts []string
	if t.Idempotent != nil && !*t.Idempotent {
		parts = append(parts, "idempotent = false")
	}
	if len(t.Effects) > 0 {
		names := make([]string, len(t.Effects))
		for i, e := range t.Effects {
			names[i] = e.Name
		}
		parts = append(parts, "effects: "+strings.Join(names, ", "))
	}
	return strings.Join(parts, "; ")
}
