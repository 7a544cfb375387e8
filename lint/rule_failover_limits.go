package lint

import (
	"fmt"
	"math"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/failover"
	"github.com/pipec/pipec/spec"
)

var ruleFailoverLimits = Rule{
	ID:       "failover-limits",
	Severity: diag.Warning,
	Doc: `failover limits that can never be reached or that stop a job before every worker was tried

Failover limits that can never be reached, or that stop a job before every
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

The worker count comes from pipec lint --workers N (or the configuration
file's workers), else from the pipeline's own workers = N. Without either the
rule does not guess: it reports only limits wrong for every pool size, a
global so small that not even one worker gets its per_worker starts.
Unlimited retries with failover are reported by unbounded-retry instead.

Bad:

    pipeline "orders" {
      workers = 2
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
      workers = 2
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
		if pass.Workers == 0 {
			reportAnyPoolSize(pass, t.Name, f, l)
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

// reportAnyPoolSize judges limits when the pool size is unknown: a global
// that stops the job before one worker had its per_worker starts is wrong on
// one worker, so on any number (with more workers the job stops with more of
// them short). Every other finding depends on the pool size.
func reportAnyPoolSize(pass *Pass, task string, f *spec.Failover, l failover.Limits) {
	if !f.Has("global") || l.PerWorker == 0 || l.Global+1 >= l.PerWorker {
		return
	}
	pass.Reportf(f.At("global", f.Range), "task %q: failover global = %d stops the job after %d start(s), fewer than per_worker = %d, so no worker ever gets its %d starts, whatever the number of workers; raise global to at least %d (workers × per_worker − 1 with the pool size: state it with workers = N in the pipeline or pipec lint --workers N)",
		task, l.Global, l.Global+1, l.PerWorker, l.PerWorker, l.PerWorker-1)
}
