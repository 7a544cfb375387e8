package lint

import (
	"github.com/pipec/pipec/internal/failover"
	"github.com/pipec/pipec/spec"
)

// failoverLimits translates a task's retry policy and failover block into the
// failover model's limits. It reports false when a limit the model needs was
// written with a value the loader refused: schema reports that, and no
// failover finding is made from a guess.
func failoverLimits(ix *Index, t *spec.Task, workers int) (failover.Limits, bool) {
	l := failover.Limits{Attempts: 1, PerWorker: t.Failover.PerWorker, Global: failover.NoLimit, Workers: workers}
	if t.Failover.Refused("per_worker") || t.Failover.Refused("global") {
		return l, false
	}
	if r := ix.Policy(t); r != nil {
		if MaxAttempts(r) == Unknown || r.Refused("max_elapsed") {
			return l, false
		}
		switch n := MaxAttempts(r); {
		case RetriesForever(r):
			l.Attempts = 0
		case n > 0:
			l.Attempts = n
		}
		// Unlimited attempts bounded by max_elapsed end the visit in time:
		// the visit structure is what matters, so one attempt stands for it.
	}
	if t.Failover.Has("global") {
		l.Global = max(t.Failover.Global, 0)
	}
	return l, true
}

// visitTrace shows the first starts of a failing task, one per visit: "w1, w2,
// w1, then stopped".
func visitTrace(l failover.Limits) string {
	l.Attempts = 1
	return failover.Simulate(l, 8).String()
}
