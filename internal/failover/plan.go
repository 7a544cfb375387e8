package failover

import "github.com/pipec/pipec/compiler"

// PlanLimits reads a compiled task's limits the way the linter reads the
// spec (lint/failover.go): a visit is the retry policy's max_attempts
// (1 without a policy; 0 unlimited, but an unlimited policy bounded by
// max_elapsed counts as one attempt, since its visit ends in time); a missing
// global is unlimited; a task without a failover block has NoFailover.
// workers is how many workers can run it.
func PlanLimits(t *compiler.PlanTask, workers int) Limits {
	l := Limits{Attempts: 1, Global: NoLimit, Workers: workers}
	if r := t.Retry; r != nil {
		switch {
		case r.MaxAttempts == 0 && r.MaxElapsed == "":
			l.Attempts = 0
		case r.MaxAttempts > 0:
			l.Attempts = r.MaxAttempts
		}
	}
	if f := t.Failover; f != nil {
		l.PerWorker = f.PerWorker
		if f.Global != nil {
			l.Global = max(*f.Global, 0)
		}
	} else {
		l.NoFailover = true
	}
	return l
}
