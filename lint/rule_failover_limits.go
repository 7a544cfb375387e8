package lint

import (
	"fmt"
	"math"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/failover"
)

var ruleFailoverLimits = Rule{
	ID:       "failover-limits",
	Severity: diag.Warning,
	Summary:  "failover limits that can never be reached or that stop a job before every worker was tried",
	Doc: `Failover limits that can never be reached, or that stop a job before every
worker was tried.

A task retries on its worker (its retry policy), then fails over to the next
worker. per_worker is how many starts one worker gets (the first start
counts); global is how many failovers are allowed before the job stops. With
W workers, a failing task has W × per_worker starts, so W × per_worker − 1
failovers:

  - global larger than that is never reached: every worker is exhausted first
    and the job waits, active and in error, for a new worker instead of failing
    (with 2 workers and per_worker = 2, global = 4 gives w1, w2, w1, w2, then
    waiting);
  - global smaller than that stops the job before every worker had its starts
    (global = 2 gives w1, w2, w1, then stopped: w2 got one start, not two), or
    before some worker was tried at all.

pipec cannot know how many workers will run the pipeline; the rule assumes 2,
as DESIGN.md section 6 does, and pipec lint --workers N changes it. Unlimited
retries with failover are reported by unbounded-retry instead.

Bad:

    pipeline "orders" {
      task "extract" {
        command = ["./extract.sh"]
        timeout = "20m"
        failover {
          per_worker = 2
          global     = 4
        }
      }
    }

Fixed:

    pipeline "orders" {
      task "extract" {
        command = ["./extract.sh"]
        timeout = "20m"
        failover {
          per_worker = 2
          global     = 3
        }
      }
    }
`,
	Run: runFailoverLimits,
}

func runFailoverLimits(pass *Pass) error {
	ix := pass.Index
	for _, t := range ix.TaskList {
		f := t.Failover
		if f == nil {
			continue
		}
		l, ok := failoverLimits(ix, t, pass.Workers)
		if !ok {
			continue
		}
		o := failover.Outcome(l)
		r := f.At("global", f.Range)
		fit := "workers − 1"
		best := l.Workers - 1
		if l.PerWorker > 0 {
			fit = "workers × per_worker − 1"
			best = math.MaxInt // hostile limits saturate rather than overflow
			if l.PerWorker <= math.MaxInt/l.Workers {
				best = l.Workers*l.PerWorker - 1
			}
		}
		on := fmt.Sprintf("on %d workers", l.Workers)
		if l.PerWorker > 0 {
			on += fmt.Sprintf(" with per_worker = %d", l.PerWorker)
		}
		switch {
		case o.End == failover.Waiting && f.Has("global"):
			pass.Reportf(r, "task %q: failover global = %d is never reached %s: after %d starts (%s) every worker is exhausted and the job waits for a new worker instead of failing (%d of %d failovers used); set global = %d (%s)",
				t.Name, l.Global, on, o.Visits, visitTrace(l), o.Failovers, l.Global, best, fit)
		case o.End == failover.Stopped && o.Unvisited > 0:
			pass.Reportf(r, "task %q: failover global = %d stops the job after %d start(s) %s (%s), before %d of %d workers ever ran it; set global = %d (%s)",
				t.Name, l.Global, o.Visits, on, visitTrace(l), o.Unvisited, l.Workers, best, fit)
		case o.End == failover.Stopped && o.Short > 0:
			pass.Reportf(r, "task %q: failover global = %d stops the job after %d starts %s (%s), before every worker had its %d starts (%d worker(s) had fewer); set global = %d (%s)",
				t.Name, l.Global, o.Visits, on, visitTrace(l), l.PerWorker, o.Short, best, fit)
		}
	}
	return nil
}
