package cli

import (
	"fmt"
	stdio "io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/failover"
	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/retry"
	"github.com/pipec/pipec/spec"
)

type simulateOptions struct {
	workers   int
	fail      []string
	join      int
	maxStarts int
	labels    []string
	// offered is what --label said, per worker (index 0 is w1); nil when
	// --label was not given: every worker then offers every label.
	offered [][]string
	// budget is how many retries the pipeline's retry_budget allows a
	// story (as if every task of the plan started and its task alone
	// failed); -1 when it has none.
	budget int
}

func newSimulateCmd(io IO) *cobra.Command {
	opts := simulateOptions{workers: 2, maxStarts: 20}
	cmd := &cobra.Command{
		Use:   "simulate SPEC",
		Short: "Show what retries and failover will do, start by start, without running anything",
		Long: "simulate steps the same failover model the linter and pipec worker use\n" +
			"(docs/design.md section 6) for failing tasks on workers w1..wN, and prints\n" +
			"one line per start, then how the story ends: stopped (failed), waiting for a\n" +
			"worker, retrying forever on one worker, or succeeded.\n\n" +
			"A simulated failure is a run error that the task's retry policy retries.\n" +
			"--fail TASK:always fails every start, TASK:once the first only,\n" +
			"TASK:transient:K the first K. Without --fail, every task with a failover\n" +
			"block (or, when none has one, every task) fails always. --join N lets N\n" +
			"more workers join, one at a time, whenever a task waits for a worker.\n\n" +
			"A task with labels starts only on workers offering all of them, as with pipec\n" +
			"worker: --label w2=spark,gpu (repeatable) gives w2 its labels, and then workers\n" +
			"not named offer none. Without --label every worker offers every label. Workers\n" +
			"that --join offer the waiting task's labels.\n\n" +
			"A pipeline's retry_budget is the run's: a story spends it as if every task of\n" +
			"the plan had started and its task alone failed, and ends when it is spent (a\n" +
			"task the budget stops does not fail over).",
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return runSimulate(io, args[0], opts)
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.workers, "workers", opts.workers, "how many workers (w1..wN)")
	f.StringArrayVar(&opts.fail, "fail", nil, "TASK:always|once|transient:K (repeatable)")
	f.IntVar(&opts.join, "join", 0, "workers that join when a task waits for one")
	f.IntVar(&opts.maxStarts, "max-starts", opts.maxStarts, "stop a story after this many starts")
	f.StringArrayVar(&opts.labels, "label", nil, "wN=LABEL[,LABEL...]: the labels worker wN offers (repeatable)")
	return cmd
}

// failMode is how a simulated task fails: the first n starts fail; n < 0 is
// every start.
type failMode struct{ n int }

func parseFail(s string) (task string, m failMode, err error) {
	task, mode, ok := strings.Cut(s, ":")
	if !ok || task == "" {
		return "", m, fmt.Errorf("--fail %q: want TASK:always, TASK:once or TASK:transient:K", s)
	}
	switch {
	case mode == "always":
		return task, failMode{-1}, nil
	case mode == "once":
		return task, failMode{1}, nil
	case strings.HasPrefix(mode, "transient:"):
		k, err := strconv.Atoi(strings.TrimPrefix(mode, "transient:"))
		if err != nil || k < 0 {
			return "", m, fmt.Errorf("--fail %q: transient:K needs a count K >= 0", s)
		}
		return task, failMode{k}, nil
	}
	return "", m, fmt.Errorf("--fail %q: unknown mode %q (want always, once or transient:K)", s, mode)
}

func runSimulate(io IO, path string, opts simulateOptions) error {
	if opts.workers < 1 || opts.workers > 1000 {
		return usageErr("simulate: --workers must be between 1 and 1000, not %d", opts.workers)
	}
	if opts.join < 0 || opts.join > 1000 {
		return usageErr("simulate: --join must be between 0 and 1000, not %d", opts.join)
	}
	if opts.maxStarts < 1 || opts.maxStarts > 100000 {
		return usageErr("simulate: --max-starts must be between 1 and 100000, not %d", opts.maxStarts)
	}
	if len(opts.labels) > 0 {
		opts.offered = make([][]string, opts.workers)
		for _, a := range opts.labels {
			i, labels, err := parseWorkerLabels(a, opts.workers)
			if err != nil {
				return usageErr("simulate: %v", err)
			}
			opts.offered[i] = queue.NormalLabels(append(opts.offered[i], labels...))
		}
	}
	c, err := loadSpec(path)
	if err != nil {
		return err
	}
	// Findings are shown, but the simulation runs whenever there is a plan:
	// seeing what a bad limit does is the point (unbounded-retry is an error,
	// and its story is worth reading).
	var ds diag.Diagnostics
	ds = append(ds, c.Diags...)
	if c.Result != nil {
		// With --label, lint judges each labelled task on the workers
		// offering its labels, as the simulation below plays it.
		ds = append(ds, lint.Run(c.Result, c.Src, lint.Options{Workers: opts.workers, WorkerLabels: opts.offered})...)
	}
	ds = ds.Sort()
	printDiagsText(io, ds, c.sources())
	if c.Result == nil || c.Result.Plan == nil {
		return silentExit(ExitFindings)
	}
	plan := c.Result.Plan
	byName := map[string]*compiler.PlanTask{}
	for i := range plan.Tasks {
		byName[plan.Tasks[i].Name] = &plan.Tasks[i]
	}
	type story struct {
		t    *compiler.PlanTask
		mode failMode
	}
	var stories []story
	seen := map[string]bool{}
	for _, f := range opts.fail {
		name, mode, err := parseFail(f)
		if err != nil {
			return usageErr("simulate: %v", err)
		}
		t, ok := byName[name]
		if !ok {
			return usageErr("simulate: --fail names no task %q", name)
		}
		if seen[name] {
			return usageErr("simulate: --fail names task %q twice", name)
		}
		seen[name] = true
		stories = append(stories, story{t, mode})
	}
	if len(stories) == 0 {
		for i := range plan.Tasks {
			if plan.Tasks[i].Failover != nil {
				stories = append(stories, story{&plan.Tasks[i], failMode{-1}})
			}
		}
	}
	if len(stories) == 0 {
		for i := range plan.Tasks {
			stories = append(stories, story{&plan.Tasks[i], failMode{-1}})
		}
	}
	opts.budget = -1
	if b := plan.RetryBudget; b != nil {
		opts.budget = retry.Budget{Ratio: b.Ratio, Min: b.Min}.Allowed(len(plan.Tasks))
		retries := "retries"
		if opts.budget == 1 {
			retries = "retry"
		}
		fmt.Fprintf(io.Stdout, "retry budget: %d %s for the run (ratio %s of its %s, at least %d), the story's task alone failing\n\n",
			opts.budget, retries, strconv.FormatFloat(b.Ratio, 'g', -1, 64), plural(strconv.Itoa(len(plan.Tasks)), "task"), b.Min)
	}
	for i, s := range stories {
		if i > 0 {
			fmt.Fprintln(io.Stdout)
		}
		simulateTask(io.Stdout, s.t, s.mode, opts)
	}
	if ds.HasErrors() {
		return silentExit(ExitFindings)
	}
	return nil
}

// parseWorkerLabels reads --label wN=L1,L2 into N-1 and the labels.
func parseWorkerLabels(s string, workers int) (int, []string, error) {
	name, list, ok := strings.Cut(s, "=")
	n, err := strconv.Atoi(strings.TrimPrefix(name, "w"))
	if !ok || !strings.HasPrefix(name, "w") || err != nil || n < 1 {
		return 0, nil, fmt.Errorf("--label %q: want wN=LABEL[,LABEL...], such as w2=spark", s)
	}
	if n > workers {
		return 0, nil, fmt.Errorf("--label %q: there is no %s with --workers %d", s, name, workers)
	}
	labels := strings.Split(list, ",")
	for _, l := range labels {
		if !spec.ValidLabel(l) {
			return 0, nil, fmt.Errorf("--label %q: %s", s, spec.LabelError(l))
		}
	}
	return n - 1, labels, nil
}

// foreverShown is how many starts a story that retries forever on one
// worker shows before saying so.
const foreverShown = 3

// simulateTask prints one task's story: a line per start, then its end.
func simulateTask(w stdio.Writer, t *compiler.PlanTask, mode failMode, opts simulateOptions) {
	// The story plays out among the workers offering the task's labels
	// alone, as in pipec worker: the others are no workers for it.
	all := failover.WorkerNames(opts.workers)
	workers := all
	switch {
	case len(t.Labels) == 0:
	case opts.offered != nil:
		workers = failover.EligibleNames(t.Labels, all, opts.offered)
		fmt.Fprintf(w, "%s requires labels %s: offered by %s\n", t.Name, strings.Join(t.Labels, ","), namesOrNone(workers))
	default:
		fmt.Fprintf(w, "%s requires labels %s: taken to be offered by every worker (say which with --label wN=...)\n",
			t.Name, strings.Join(t.Labels, ","))
	}
	n := len(all)
	joins := opts.join
	l := failover.PlanLimits(t, max(len(workers), 1))
	var s failover.State
	retries := 0
	for {
		i := s.Pick(l, workers)
		if i < 0 && !s.Stopped && joins > 0 {
			joins--
			n++
			workers = append(workers, fmt.Sprintf("w%d", n))
			fmt.Fprintf(w, "%s joins\n", workers[len(workers)-1])
			continue
		}
		if i < 0 {
			fmt.Fprintln(w, failover.WaitingFor(t.Labels, l, &s, len(workers) == 0))
			return
		}
		if s.Starts >= opts.maxStarts {
			fmt.Fprintf(w, "cut after %d starts (--max-starts): %s\n", s.Starts, endOf(l))
			return
		}
		worker := workers[i]
		_ = s.Start(l, worker, workers) // Pick only returns a worker Start accepts
		detail := s.Describe(l, workers)
		if l.Attempts != 1 {
			of := "unlimited"
			if l.Attempts > 0 {
				of = strconv.Itoa(l.Attempts)
			}
			detail = fmt.Sprintf("attempt %d of %s on %s, %s", s.InVisit, of, worker, detail)
		}
		fmt.Fprintf(w, "start %d: %s on %s (%s)\n", s.Starts, t.Name, worker, detail)
		if mode.n >= 0 && s.Starts > mode.n {
			fmt.Fprintf(w, "succeeded on %s after %d start(s), %d failover(s)\n", worker, s.Starts, s.Failovers)
			return
		}
		// The run's budget is asked only for a retry on the same worker, as
		// the runtime asks it; a task it refuses does not fail over.
		if opts.budget >= 0 && (l.Attempts == 0 || s.InVisit < l.Attempts) {
			if retries == opts.budget {
				fmt.Fprintf(w, "stopped (failed): %s failed on %s after %d start(s); the run's retry budget is spent "+
					"(%d of %d retries used), and a task it stops does not fail over\n", t.Name, worker, s.Starts, retries, opts.budget)
				return
			}
			retries++
		}
		if l.Attempts == 0 && mode.n < 0 && s.Starts >= foreverShown && opts.budget < 0 {
			fmt.Fprintf(w, "retries forever on %s: never fails over\n", worker)
			return
		}
		if s.Failed(l, true, false) == failover.Stop {
			why := fmt.Sprintf("another failover would exceed global = %d", l.Global)
			if l.NoFailover {
				why = "it has no failover block, so it does not fail over"
			}
			fmt.Fprintf(w, "stopped (failed): %s failed on %s after %d start(s); %s\n", t.Name, worker, s.Starts, why)
			return
		}
	}
}

func namesOrNone(names []string) string {
	if len(names) == 0 {
		return "no worker"
	}
	return strings.Join(names, ", ")
}

// endOf says where a cut story goes.
func endOf(l failover.Limits) string {
	if l.PerWorker == 0 && l.Global == failover.NoLimit {
		return "fails over forever, neither per_worker nor global is set"
	}
	return "the story goes on"
}
