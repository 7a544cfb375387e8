package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/objstore"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
)

type submitOptions struct {
	state    stateFlag
	interval string
	wait     bool
	poll     time.Duration
	// due submits what the schedule says is due at now (see due.go).
	due       bool
	now       string
	dryRun    bool
	force     bool
	artifacts artifactsFlag
	engine    engineFlag
}

func newSubmitCmd(io IO) *cobra.Command {
	opts := submitOptions{poll: 200 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "submit SPEC --interval DATE | --due [--state URL|FILE] [--wait]",
		Short: "Hand a run to the workers of a shared state",
		Long: "submit compiles the spec, records a run of the interval in the shared state (a\n" +
			"postgres:// URL, or an SQLite file shared by workers on this machine; by default the\n" +
			"state beside the spec, as for pipec run) with its DAG, and returns: workers (`pipec\n" +
			"worker`) claim its tasks, and the run goes on whether or not this process lives. With\n" +
			"--wait it follows the run, task by task, including \"waiting for a worker\", and exits\n" +
			"with its status (1 when it failed). Tasks run in the spec's folder, which the workers\n" +
			"must see. A run beyond the schedule's max_active_runs (runs in progress, whoever started\n" +
			"them) is refused (exit 1); with --wait it waits for a free run slot first.\n" +
			"--due submits instead the intervals due now (see pipec run --due), as many at once as\n" +
			"max_active_runs leaves free, the next as one ends; it returns once the last is handed\n" +
			"over (with --wait, once it ended). Nothing due: exit 0, saying so. --due --dry-run prints\n" +
			"what --due would hand over and submits nothing: no run is created, and no state is made\n" +
			"where there is none.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if e := opts.engine.get(io); e != "" && io.engine == nil && !(opts.due && opts.dryRun) {
				// A dry run hands nothing over: it reads the state here.
				return delegate(io, cmd, args, e, !opts.due)
			}
			return runSubmit(cmd.Context(), io, args[0], opts)
		},
	}
	f := cmd.Flags()
	opts.state.register(cmd)
	f.StringVar(&opts.interval, "interval", "", "the interval's start: a date (2024-01-01) or an RFC 3339 time (required)")
	f.BoolVar(&opts.wait, "wait", false, "follow the run until it ends and exit with its status")
	f.DurationVar(&opts.poll, "poll", opts.poll, "how often --wait looks at the run")
	f.BoolVar(&opts.due, "due", false, "instead of --interval: submit the intervals due now by the schedule (as pipec run --due), at most max_active_runs at once")
	f.StringVar(&opts.now, "now", "", "with --due: judge what is due at this RFC 3339 time instead of the wall clock (also "+nowEnv+")")
	_ = f.MarkHidden("now")
	f.BoolVar(&opts.dryRun, "dry-run", false, "with --due: print what would be submitted, and submit nothing")
	f.BoolVar(&opts.force, "force", false, "with --interval: run every task again, even those a previous run of the interval completed")
	opts.artifacts.register(cmd, "the shared artifact store's folder, recorded with the run in place of the spec's artifacts "+
		"(a worker's own --artifacts wins over it)")
	opts.engine.register(cmd)
	return cmd
}

func runSubmit(ctx context.Context, io IO, path string, opts submitOptions) error {
	if opts.due {
		return runSubmitDue(ctx, io, path, opts)
	}
	if opts.dryRun {
		return usageErr("submit: --dry-run previews --due")
	}
	if io.engine != nil {
		return usageErr("submit --engine: %s submit hands one interval over itself; only --due comes here", engineCommand)
	}
	if opts.interval == "" {
		return usageErr("submit: --interval is required (the interval's start, such as --interval 2024-01-01), or --due")
	}
	plan, err := loadPlanForWorkers(io, path)
	if err != nil {
		return err
	}
	iv, err := runtime.ResolveInterval(plan.Schedule, opts.interval)
	if err != nil {
		return usageErr("%v", err)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	st, q, base, err := openSubmission(ctx, io, path, plan, opts)
	if err != nil {
		return err
	}
	defer st.Close()
	sub := submission(plan, base, iv, opts.interval, opts.force)
	run, err := submitWhenFree(ctx, io, q, sub, opts.wait, opts.poll)
	if err != nil {
		return &exitError{Code: ExitFindings, Err: err}
	}
	fmt.Fprintf(io.Stdout, "submitted %s (%d tasks)\n", run.ID, len(sub.Tasks))
	noteNoWorker(ctx, io, q)
	noteUnservedLabels(ctx, io, q, plan)
	if !opts.wait {
		return nil
	}
	return followRun(ctx, io, q, run.ID, opts.poll, planTaskOrder(plan))
}

// submitWhenFree submits sub; with wait, a refusal for want of a run slot
// (max_active_runs runs of the pipeline in progress) is waited out,
// saying so each time the runs holding the slots change, and submitted
// again every poll until a slot is free.
func submitWhenFree(ctx context.Context, io IO, q queue.Queue, sub queue.Submission, wait bool, poll time.Duration) (store.Run, error) {
	told := ""
	for {
		run, err := q.Submit(ctx, sub)
		var full *store.RunSlotsError
		if !errors.As(err, &full) {
			return run, err
		}
		if !wait {
			return run, fmt.Errorf("%v; wait for one with --wait", full)
		}
		if d := full.Detail(); d != told {
			told = d
			fmt.Fprintf(io.Stdout, "waiting for a free run slot: %s\n", d)
		}
		select {
		case <-ctx.Done():
			return store.Run{}, fmt.Errorf("waiting for a free run slot: %w", ctx.Err())
		case <-time.After(max(poll, 10*time.Millisecond)):
		}
	}
}

// runSubmitDue is pipec submit --due: the due intervals, handed to the
// workers.
func runSubmitDue(ctx context.Context, io IO, path string, opts submitOptions) error {
	if opts.interval != "" || opts.force {
		return usageErr("submit: --due decides the intervals itself: it takes neither --interval nor --force")
	}
	now, err := dueNow(io, opts.now)
	if err != nil {
		return err
	}
	plan, err := loadPlanForWorkers(io, path)
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.dryRun {
		if opts.wait {
			return usageErr("submit: --dry-run launches nothing for --wait to follow")
		}
		loc, err := opts.state.location(io, path)
		if err != nil {
			return err
		}
		st, err := openIfExists(ctx, io, loc)
		if err != nil {
			return err
		}
		if st != nil {
			defer st.Close()
		}
		return dueRun(ctx, io, plan, st, workQueue(st), now, nil, true, true, true)
	}
	st, q, base, err := openSubmission(ctx, io, path, plan, opts)
	if err != nil {
		return err
	}
	defer st.Close()
	launch, stop := submitLaunch(ctx, io, plan, base, q, opts.poll, false)
	defer stop()
	if io.engine != nil {
		e := opts.engine.get(io)
		if e == "" {
			return usageErr("submit --due: give the engine with --engine temporal://HOST:PORT or set %s", engineEnv)
		}
		launch = engineLaunch(io, io.engine, e, st, plan, base, opts.poll, false)
	}
	return dueRun(ctx, io, plan, st, q, now, launch, true, !opts.wait, false)
}

// startedOn is the worker of a task's latest start: the current visit's,
// or, once it ended, the claim's (a success keeps it) or the one it left.
func startedOn(ts queue.TaskStatus) string {
	switch {
	case ts.Failover.Worker != "":
		return ts.Failover.Worker
	case ts.Worker != "":
		return ts.Worker
	}
	return ts.Failover.Last
}

// planTaskOrder is the rank of each task in the plan's order (a task comes
// after every task it needs).
func planTaskOrder(plan *compiler.Plan) map[string]int {
	rank := map[string]int{}
	for _, id := range plan.Order {
		if name, ok := strings.CutPrefix(id, "task."); ok {
			rank[name] = len(rank)
		}
	}
	return rank
}

// followRun prints each change of a submitted run's tasks and its waiting
// state until the run ends; exit code 1 when it failed. Changes seen in one
// look are told in the plan's order (rank), so a task that ran between two
// looks is never told before the task it read from.
func followRun(ctx context.Context, io IO, q queue.Queue, run string, poll time.Duration, rank map[string]int) error {
	seen := map[string]string{}
	started := map[string]int{}
	waiting := ""
	t := time.NewTicker(max(poll, 10*time.Millisecond))
	defer t.Stop()
	outage := stateOutage{w: io.Stderr, prefix: "pipec: ", run: run}
	read := statusReader(q)
	// A queue that can tells the run's end, looked at then, not at the
	// next poll; nil (never ready) when it cannot, or no longer can.
	var ended <-chan struct{}
	if e, ok := q.(queue.RunEnds); ok {
		ectx, cancel := context.WithCancel(ctx)
		defer cancel()
		if ch, err := e.RunEnded(ectx, run); err == nil {
			ended = ch
		}
	}
	next := func() bool { // false when ctx ended
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		case _, ok := <-ended:
			if !ok {
				ended = nil
			}
		}
		return true
	}
	for {
		lctx, cancel := context.WithTimeout(ctx, lookTimeout)
		rs, err := read(lctx, run)
		cancel()
		if errors.Is(err, store.ErrNotFound) {
			return &exitError{Code: ExitFindings, Err: err}
		}
		if err != nil {
			outage.failed(err)
			if !next() {
				fmt.Fprintf(io.Stderr, "pipec: stopped following %s; it goes on with the workers\n", run)
				return &exitError{Code: ExitFindings}
			}
			continue
		}
		outage.answered()
		for _, ts := range planOrder(rs.Tasks, rank) {
			// A start is told from the task's start count, not only from
			// seeing it claimed: a task that ran between two looks (fast
			// workers on one SQLite file) still shows where it started.
			if n := ts.Failover.Starts; n != started[ts.Task] {
				if on := startedOn(*ts); n > started[ts.Task] && on != "" {
					fmt.Fprintf(io.Stdout, "%s: start %d on %s (%s)\n", ts.Task, n, on, ts.Failover.Describe(ts.Limits, nil))
				}
				started[ts.Task] = n // lower after a hand-back: the next start is told again
			}
			line := ts.State
			switch ts.State {
			case queue.WorkClaimed:
				continue // told as its start
			case queue.WorkFailed, queue.WorkNotRun:
				line = ts.State + ": " + ts.Reason
			case queue.WorkSucceeded:
				line = cmp.Or(ts.Reason, ts.State) // "reused (…)" when its visit ran nothing
			case queue.WorkReady:
				if ts.Reason != "" {
					line = "ready again: " + ts.Reason
				}
			}
			if seen[ts.Task] != line {
				seen[ts.Task] = line
				if ts.State != queue.WorkBlocked {
					fmt.Fprintf(io.Stdout, "%s: %s\n", ts.Task, line)
				}
			}
		}
		if rs.Waiting != waiting {
			waiting = rs.Waiting
			if waiting != "" {
				fmt.Fprintf(io.Stdout, "%s\n", waiting)
			}
		}
		if rs.Run.State.Ended() {
			fmt.Fprintf(io.Stdout, "run %s %s\n", run, strings.TrimSpace(string(rs.Run.State)+" "+rs.Run.Cancelled))
			if rs.Run.State != store.RunSucceeded {
				return silentExit(ExitFindings)
			}
			return nil
		}
		if !next() {
			fmt.Fprintf(io.Stderr, "pipec: stopped following %s; it goes on with the workers\n", run)
			return &exitError{Code: ExitFindings}
		}
	}
}

// statusReader reads one run's status again and again: on a queue that
// can, reading and decoding again only the tasks that changed.
func statusReader(q queue.Queue) func(ctx context.Context, run string) (queue.RunStatus, error) {
	f, ok := q.(queue.StatusFollower)
	if !ok {
		return q.Status
	}
	var memo queue.StatusMemo
	return func(ctx context.Context, run string) (queue.RunStatus, error) { return f.FollowStatus(ctx, run, &memo) }
}

// planOrder returns tasks sorted by rank, stably (tasks of one rank stay
// in the store's order). It sorts pointers by their ranks looked up once:
// a follower sorts every task of its run at every poll.
func planOrder(tasks []queue.TaskStatus, rank map[string]int) []*queue.TaskStatus {
	type ranked struct {
		rank, i int
	}
	keys := make([]ranked, len(tasks))
	for i := range tasks {
		keys[i] = ranked{rank[tasks[i].Task], i}
	}
	slices.SortFunc(keys, func(a, b ranked) int { return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.i, b.i)) })
	out := make([]*queue.TaskStatus, len(tasks))
	for j, k := range keys {
		out[j] = &tasks[k.i]
	}
	return out
}

// noteNoWorker says so when no worker is live: the run waits until one
// starts.
func noteNoWorker(ctx context.Context, io IO, q queue.Queue) {
	ws, err := q.Workers(ctx)
	if err != nil {
		return
	}
	for _, w := range ws {
		if w.Live && w.State == queue.WorkerLive {
			return
		}
	}
	fmt.Fprintln(io.Stderr, "pipec: no worker is live: the run waits until one starts (pipec worker --state …)")
}

// openSubmission opens the shared state that pipec submit hands plan to
// (spec at path), names the plan's artifact store (--artifacts), and
// returns the spec's folder as the tasks run in it; a plan whose sinks
// are bound to another state is refused (refuseForeignSinks).
func openSubmission(ctx context.Context, io IO, path string, plan *compiler.Plan, opts submitOptions) (store.Store, queue.Queue, string, error) {
	st, q, loc, err := openQueue(ctx, io, &opts.state, path, "", stateRestartWait)
	if err != nil {
		return nil, nil, "", err
	}
	fail := func(err error) (store.Store, queue.Queue, string, error) {
		st.Close()
		return nil, nil, "", err
	}
	base, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return fail(usageErr("%v", err))
	}
	arts, err := opts.artifacts.path()
	if err != nil {
		return fail(err)
	}
	withArtifacts(plan, arts)
	if err := refuseForeignSinks(ctx, st, loc, plan, base); err != nil {
		return fail(&exitError{Code: ExitFindings, Err: err})
	}
	return st, q, base, nil
}

// refuseForeignSinks refuses a plan handed to the workers of st whose
// publishes go to a sink bound to another state, as pipec run refuses the
// run: every publish into it would be refused once the workers ran its
// task (sink.RefusesState). A sink this machine cannot read is left to
// the workers, which ask it before a task that publishes there runs.
func refuseForeignSinks(ctx context.Context, st store.Store, loc store.Location, plan *compiler.Plan, baseDir string) error {
	id, err := st.StateID(ctx)
	if err != nil {
		return err
	}
	statePath, err := statePathOf(loc)
	if err != nil {
		return err
	}
	published := map[string]bool{}
	for _, p := range plan.Publishes {
		published[p.Sink] = true
	}
	objects := new(objstore.Clients)
	for _, ps := range plan.Sinks {
		if !published[ps.Name] {
			continue
		}
		s, err := sink.Open(sink.Config{Name: ps.Name, Type: ps.Type, Path: ps.Path, Fencing: ps.Fencing, BaseDir: baseDir,
			Pipeline: plan.Pipeline, Store: st, StatePath: statePath, ObjectStores: objects})
		if err != nil {
			continue // the workers' visits say it
		}
		if err := sink.RefusesState(ctx, s, id); err != nil {
			return err
		}
	}
	return nil
}
