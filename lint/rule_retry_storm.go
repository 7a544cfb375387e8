package lint

import (
	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
)

// manyRetriedTasks is how many retried tasks make a pipeline-wide retry budget
// necessary: beyond it, one systemic failure (a database down) multiplies the
// load on the failing system by the attempts of every task.
const manyRetriedTasks = 5

var ruleRetryStorm = Rule{
	ID:       "retry-storm",
	Severity: diag.Warning,
	Doc: `retries with no backoff, no jitter, or many retried tasks and no retry budget

Retries that can turn one outage into a storm: a policy with no backoff
(initial = "0s" or max_delay = "0s": every retry starts at once; multiplier 1
or less, or max_delay no longer than the initial delay: every retry waits the
same delay), a policy with
jitter = "none" (every task failed by one outage retries at the same instants),
or five or more retried tasks and no retry_budget.

A systemic failure (a database restarting, a rate limit) fails many tasks at
once. Without growing, randomised delays their retries arrive together and keep
the failing system down; without a budget, the retries of every task multiply
the load. A retry_budget caps retries per run at a ratio of first attempts.
Policies that retry nothing (max_attempts = 1) are not reported.

Bad:

    pipeline "orders" {
      retry "default" {
        max_attempts = 4
        multiplier   = 1
        jitter       = "none"
      }
    }

Fixed:

    pipeline "orders" {
      retry_budget {
        ratio = 0.2
        min   = 3
      }
      retry "default" {
        max_attempts = 4
        initial      = "10s"
        multiplier   = 2
        jitter       = "full"
      }
    }
`,
	Run: runRetryStorm,
}

func runRetryStorm(pass *Pass) error {
	ix := pass.Index
	for i := range pass.Spec.Retries {
		r := &pass.Spec.Retries[i]
		if ix.Policies[r.Name] != r || !Retries(r) {
			continue
		}
		// Fields the loader refused are not judged: schema reported them.
		immediate := ""
		switch {
		case r.Valid("max_delay") && r.MaxDelay == 0:
			immediate = "max_delay"
		case r.Valid("initial") && r.Initial == 0:
			immediate = "initial"
		}
		if immediate != "" {
			pass.Reportf(r.At(immediate, r.NameRange),
				"retry policy %q has %s = \"0s\", so every retry starts at once (no backoff): retries of tasks failed by one outage hit it again immediately; wait before retrying (e.g. initial = \"10s\", max_delay = \"10m\")", r.Name, immediate)
			continue
		}
		noGrowth := r.Valid("multiplier") && r.Multiplier <= 1
		if noGrowth {
			pass.Reportf(r.At("multiplier", r.NameRange),
				"retry policy %q has multiplier = %g, so delays never grow (no backoff): retries of tasks failed by one outage keep hitting it at the same pace; use a multiplier of 2", r.Name, r.Multiplier)
		}
		initial := r.Initial
		if initial == 0 && !r.Has("initial") {
			initial = compiler.DefaultInitial
		}
		if r.MaxDelay > 0 && !r.Refused("initial") && r.MaxDelay <= initial && !noGrowth {
			pass.Reportf(r.At("max_delay", r.NameRange),
				"retry policy %q has max_delay = %s, no longer than its initial delay %s, so delays never grow (no backoff); raise max_delay (e.g. %s)", r.Name, fmtDuration(r.MaxDelay), fmtDuration(initial), fmtDuration(initial*32))
		}
		if r.Jitter == spec.JitterNone {
			pass.Reportf(r.At("jitter", r.NameRange),
				"retry policy %q has jitter = \"none\": tasks failed by one outage all retry at the same instants; use jitter = \"full\"", r.Name)
		}
	}
	if pass.Spec.RetryBudget != nil {
		return nil
	}
	retried := 0
	var first string
	for _, t := range ix.TaskList {
		if ix.RetryingPolicy(t) != nil {
			if retried == 0 {
				first = t.Name
			}
			retried++
		}
	}
	if retried >= manyRetriedTasks {
		pass.Reportf(pass.Spec.NameRange,
			"pipeline %q retries %d tasks (the first is %q) with no retry_budget: one systemic failure retries every one of them; add retry_budget { ratio = 0.2, min = 3 }",
			pass.Spec.Name, retried, first)
	}
	return nil
}
