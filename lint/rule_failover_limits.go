package lint

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/failover"
	"github.com/pipec/pipec/spec"
)

var ruleFailoverLimits = Rule{
	ID:       "failover-limits",
	Severity: diag.Warning,
	Doc: `failover limits that can never be reached or that stop a job before every worker was tried, or labels no declared worker offers

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

A task that requires labels (labels = ["spark"]) runs only on the workers
offering all of them, so its failover story plays out among those alone.
When the configuration file describes the workers with their labels
(workers: [{labels: [spark]}, {labels: [spark, gpu]}, {}] in .pipec.yaml,
the workers named w1, w2, ... in that order), a labelled task is judged on
its eligible workers (w1 and w2 here, by the rule the runtime's claim and
pipec simulate use), and a task whose labels no declared worker offers is
reported at its labels: its runs would wait for such a worker forever.
Without that description every task is judged on the whole pool.

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
	pool := failover.WorkerNames(len(pass.WorkerLabels))
	for _, t := range ix.TaskList {
		workers, names := pass.Workers, []string(nil)
		required := taskLabels(t)
		if pass.WorkerLabels != nil && len(required) > 0 && !t.Refused("labels") {
			names = failover.EligibleNames(required, pool, pass.WorkerLabels)
			if len(names) == 0 {
				reportNoWorkerOffers(pass, t, required)
				continue
			}
			workers = len(names)
		}
		f := t.Failover
		if f == nil {
			continue
		}
		l, ok := failoverLimits(ix, t, workers)
		if !ok {
			continue
		}
		if workers == 0 {
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
		every := "every worker"
		if names != nil {
			on = fmt.Sprintf("on the %d of %d workers offering labels %s (%s)", l.Workers, len(pool), strings.Join(required, ","), shortList(names))
			every = "every worker offering its labels"
			fit = strings.Replace(fit, "workers", "eligible workers", 1)
		}
		if l.PerWorker > 0 {
			on += fmt.Sprintf(" with per_worker = %d", l.PerWorker)
		}
		trace := namedTrace(l, names)
		switch {
		case o.End == failover.Waiting && f.Has("global"):
			pass.Reportf(r, "task %q: failover global = %d is never reached %s: after %d starts (%s) %s is exhausted and the job waits for a new worker instead of failing (%d of %d failovers used); set global = %d (%s)",
				t.Name, l.Global, on, o.Visits, trace, every, o.Failovers, l.Global, best, fit)
		case o.End == failover.Stopped && o.Unvisited > 0:
			pass.Reportf(r, "task %q: failover global = %d stops the job after %d start(s) %s (%s), before %d of %d workers ever ran it; set global = %d (%s)",
				t.Name, l.Global, o.Visits, on, trace, o.Unvisited, l.Workers, best, fit)
		case o.End == failover.Stopped && o.Short > 0:
			pass.Reportf(r, "task %q: failover global = %d stops the job after %d starts %s (%s), before %s had its %d starts (%d worker(s) had fewer); set global = %d (%s)",
				t.Name, l.Global, o.Visits, on, trace, every, l.PerWorker, o.Short, best, fit)
		}
	}
	return nil
}

// taskLabels is a task's required labels, sorted and without repeats, as
// the plan keeps them.
func taskLabels(t *spec.Task) []string {
	out := make([]string, 0, len(t.Labels))
	for _, l := range t.Labels {
		if l.Name != "" {
			out = append(out, l.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// reportNoWorkerOffers reports a labelled task that no declared worker may
// run: its runs would wait for such a worker forever, so the mistake is in
// the task's labels or in the pool's description, and it is shown where
// the labels are written. The labels no worker offers at all are named;
// when each is offered by some worker but none offers them all, that is
// said instead.
func reportNoWorkerOffers(pass *Pass, t *spec.Task, required []string) {
	var missing []string
	for _, l := range required {
		offered := false
		for _, w := range pass.WorkerLabels {
			if slices.Contains(w, l) {
				offered = true
				break
			}
		}
		if !offered {
			missing = append(missing, l)
		}
	}
	n := len(pass.WorkerLabels)
	why := fmt.Sprintf("no single worker of the %d declared offers all of %s (each is offered by some worker)", n, strings.Join(required, ","))
	if len(missing) > 0 {
		why = fmt.Sprintf("none of the %d declared workers offers %s", n, strings.Join(missing, ","))
	}
	pass.Reportf(t.At("labels", t.Range), "task %q requires labels %s, but %s: its runs would wait for such a worker forever; add the labels to a worker of the configuration's workers list, or change the task's labels",
		t.Name, strings.Join(required, ","), why)
}

// namedTrace is visitTrace with the eligible workers' own names (w2, w3)
// in place of w1..wN, so a labelled task's story names the workers of the
// configuration it runs on; names nil is the whole pool.
func namedTrace(l failover.Limits, names []string) string {
	if names == nil {
		return visitTrace(l)
	}
	l.Attempts = 1
	tr := failover.Simulate(l, 8)
	parts := make([]string, len(tr.Workers))
	for i, w := range tr.Workers {
		parts[i] = names[w]
	}
	if tr.End == failover.Forever {
		return strings.Join(parts, ", ") + ", ... forever"
	}
	return strings.Join(parts, ", ") + ", then " + tr.End.String()
}

// shortList joins names, cut after a few so a large pool does not make a
// message of thousands of names.
func shortList(names []string) string {
	const most = 6
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
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
