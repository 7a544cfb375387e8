package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/schedule"
	"github.com/pipec/pipec/runtime/store"
)

type backfillOptions struct {
	execFlags
	from, to string
	dryRun   bool
	stale    bool
	force    bool
	submit   bool
	wait     bool
	poll     time.Duration
	engine   engineFlag
}

func newBackfillCmd(io IO) *cobra.Command {
	opts := backfillOptions{poll: 200 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "backfill SPEC|PLAN --from DATE --to DATE [--dry-run] [--stale|--force] [--submit [--wait]]",
		Short: "Run every interval from --from to --to (inclusive), bounded; --dry-run prints the estimate",
		Long: "Backfill runs the intervals whose start lies between --from and --to, both included, at most\n" +
			"schedule.max_active_runs at a time (one at a time without it, or when a task reads an earlier\n" +
			"interval's artifact). An interval already complete (every publish shows a version of the\n" +
			"spec's code_version) is skipped; one a run is in progress for is left to it; one whose input\n" +
			"from an earlier interval has no accepted version is blocked; each is said so. With --stale\n" +
			"only intervals whose visible version has another code_version are rebuilt (after a logic\n" +
			"fix). With --force every interval runs, complete or not, and every task of each again (after\n" +
			"a source's data was corrected). Otherwise each interval is an ordinary run: completed work\n" +
			"is reused. The runs share their slots: a pool's slots and --parallel bound the whole\n" +
			"backfill. A line per interval says how far it got, with an ETA from the mean of the\n" +
			"finished intervals.\n" +
			"--dry-run launches nothing and prints what would run and the estimate: runs ÷ slots × time\n" +
			"per run, with the slots and the time per run it prints. The slots are the smaller bound of\n" +
			"the run slots and the busiest pool (its slots over the share of a run its tasks' timeouts\n" +
			"take), and the estimate names the bound; the time per run is the mean of this pipeline's\n" +
			"finished runs in the state, else the task timeouts along the longest path. Exit code 1\n" +
			"when an interval is blocked.\n" +
			"--submit hands each interval to the workers of a shared state (as pipec submit), as many at\n" +
			"once as the slots allow, and returns once the last is handed over; with --wait it follows\n" +
			"them to the end and exits 1 when one failed. With --engine temporal://HOST:PORT (default:\n" +
			"PIPEC_ENGINE) the runs go to Temporal's workers instead (docs/temporal.md).",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.resolve(cmd); err != nil {
				return err
			}
			if cmd.Flags().Changed("engine") && !opts.submit {
				return usageErr("backfill: --engine hands the intervals to an engine's workers: give --submit too")
			}
			if e := opts.engine.get(io); e != "" && io.engine == nil && opts.submit && !opts.dryRun {
				// A dry run hands nothing over: it reads the state here.
				return delegate(io, cmd, args, e, false)
			}
			return runBackfill(cmd.Context(), io, args[0], opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.from, "from", "", "start of the first interval (required)")
	f.StringVar(&opts.to, "to", "", "start of the last interval, included (required)")
	f.BoolVar(&opts.dryRun, "dry-run", false, "print what would run and the estimate, and launch nothing")
	f.BoolVar(&opts.stale, "stale", false, "rebuild only stale intervals: a visible version of another code_version, a task edited since, or one that read an interval rebuilt since")
	f.BoolVar(&opts.force, "force", false, "run every interval, complete or not, and every task of each again (after a source's data was corrected)")
	f.BoolVar(&opts.submit, "submit", false, "hand the intervals to the workers of the shared state instead of running them here")
	f.BoolVar(&opts.wait, "wait", false, "with --submit: follow the runs until the last ends and exit with their status")
	f.DurationVar(&opts.poll, "poll", opts.poll, "with --submit: how often a submitted run is looked at")
	opts.register(cmd, "tasks running at once across the backfill (default: the number of CPUs; lowered to what the open-file limit allows)")
	opts.engine.register(cmd)
	return cmd
}

// backfillPlan is what a backfill will do.
type backfillPlan struct {
	plan      *compiler.Plan
	intervals []runtime.Interval
	decisions []schedule.Decision
	toRun     int
	slots     int
	slotsWhy  string
	perRun    time.Duration
	perRunWhy string
	// forced: every task of each interval runs again (--force).
	forced bool
}

// planBackfill decides every interval from..to with what st says (nil: a
// state where nothing ran yet).
func planBackfill(ctx context.Context, plan *compiler.Plan, from, to string, st store.Store, q queue.Queue, mode schedule.Rebuild) (*backfillPlan, error) {
	first, err := runtime.ResolveInterval(plan.Schedule, from)
	if err != nil {
		return nil, usageErr("--from: %v", err)
	}
	last, err := runtime.ResolveInterval(plan.Schedule, to)
	if err != nil {
		return nil, usageErr("--to: %v", err)
	}
	if last.Start.Before(first.Start) {
		return nil, usageErr("--to %s is before --from %s", to, from)
	}
	bp := &backfillPlan{plan: plan, forced: mode == schedule.RebuildAll}
	if bp.intervals, err = schedule.Intervals(first, last); err != nil {
		return nil, usageErr("%v", err)
	}
	sp := plan
	if sp.Schedule == nil {
		// A pipeline without a schedule has daily intervals and no start.
		sp = withDefaultSchedule(plan)
	}
	facts, err := schedule.Read(ctx, st, q, sp)
	if err != nil {
		return nil, &exitError{Code: ExitFindings, Err: fmt.Errorf("reading the state: %w", err)}
	}
	if bp.decisions, err = facts.Backfill(ctx, bp.intervals, mode); err != nil {
		return nil, &exitError{Code: ExitFindings, Err: fmt.Errorf("reading the state: %w", err)}
	}
	bp.toRun = count(bp.decisions, schedule.Run)
	bp.slots, bp.slotsWhy = schedule.Slots(plan)
	bp.perRun, bp.perRunWhy = historyPerRun(ctx, plan.Pipeline, st)
	if bp.perRun == 0 {
		bp.perRun, bp.perRunWhy = timeoutPath(plan)
	}
	return bp, nil
}

// withDefaultSchedule is plan with the schedule a pipeline without one
// runs by: every 24h, no start.
func withDefaultSchedule(plan *compiler.Plan) *compiler.Plan {
	p := *plan
	p.Schedule = &compiler.PlanSchedule{Every: runtime.DefaultEvery.String()}
	return &p
}

// historyPerRun is the mean duration of the pipeline's succeeded runs.
func historyPerRun(ctx context.Context, pipeline string, st store.Store) (time.Duration, string) {
	if st == nil {
		return 0, ""
	}
	runs, err := st.ListRuns(ctx, store.RunFilter{Pipeline: pipeline})
	if err != nil {
		return 0, ""
	}
	var total time.Duration
	n := 0
	for _, r := range runs {
		if r.State == store.RunSucceeded && !r.Finished.IsZero() {
			total += r.Finished.Sub(r.Created)
			n++
		}
	}
	if n == 0 {
		return 0, ""
	}
	return total / time.Duration(n), fmt.Sprintf("mean of %d succeeded run(s) in the state", n)
}

// timeoutPath is the longest path through the DAG weighted by task timeouts
// (compiler.TimeoutPath): an upper bound of one run when nothing ran yet.
func timeoutPath(plan *compiler.Plan) (time.Duration, string) {
	longest, missing := compiler.TimeoutPath(plan)
	if len(missing) > 0 {
		return 0, fmt.Sprintf("unknown: no finished run in the state, and task(s) without a timeout: %s", strings.Join(missing, ", "))
	}
	return longest, "upper bound: task timeouts along the longest path (no finished run in the state)"
}

func (bp *backfillPlan) print(io IO, pipeline string) {
	n := len(bp.intervals)
	fmt.Fprintf(io.Stdout, "backfill %s: %d interval(s), %s to %s (every %s)\n", pipeline, n,
		bp.intervals[0].Key, bp.intervals[n-1].Key, roundDuration(bp.intervals[0].Every))
	printDecisions(io, bp.decisions)
	if bp.forced && bp.toRun > 0 {
		fmt.Fprintf(io.Stdout, "  forced:       every task of each interval runs again, complete or not; nothing is reused\n")
	}
	if bp.toRun != n {
		fmt.Fprintf(io.Stdout, "  to run:       %d interval(s)", bp.toRun)
		var parts []string
		for _, c := range []struct {
			a    schedule.Action
			word string
		}{{schedule.Skip, "skipped"}, {schedule.Active, "in progress"}, {schedule.Blocked, "blocked"}} {
			if k := count(bp.decisions, c.a); k > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", k, c.word))
			}
		}
		fmt.Fprintf(io.Stdout, " (%s)\n", strings.Join(parts, ", "))
	}
	if bp.toRun == 0 {
		return
	}
	n = bp.toRun
	// One estimate for backfills and the catchup-stampede rule: the
	// smallest bound on the runs at once (the run slots or the busiest
	// pool), times the time per run printed above it.
	e := compiler.EstimateRuns(bp.plan, int64(n), int64(bp.slots), bp.perRun)
	fmt.Fprintf(io.Stdout, "  slots:        %s\n", slotsLine(e, bp.slotsWhy))
	if bp.perRun == 0 {
		fmt.Fprintf(io.Stdout, "  time per run: %s\n", bp.perRunWhy)
		fmt.Fprintf(io.Stdout, "  estimate:     %d runs ÷ %s = %s of unknown length (bound: %s)\n", n, plural(fmtAtOnce(e.AtOnce), "slot"),
			plural(fmtAtOnce(math.Ceil(float64(n)/e.AtOnce)), "wave"), boundName(e))
		return
	}
	fmt.Fprintf(io.Stdout, "  time per run: %s (%s)\n", roundDuration(bp.perRun), bp.perRunWhy)
	fmt.Fprintf(io.Stdout, "  estimate:     %d runs ÷ %s × %s ≈ %s (bound: %s)\n", n, plural(fmtAtOnce(e.AtOnce), "slot"),
		roundDuration(bp.perRun), roundDuration(e.Total), boundName(e))
}

// slotsLine says how many runs go at once and why: the smaller of the run
// slots (why) and what the busiest pool allows, naming the other bound.
func slotsLine(e compiler.Estimate, why string) string {
	if e.ByPool {
		s := fmt.Sprintf("%s (pool %q: %s; its tasks' timeouts take %s of a run's %s along the longest path", fmtAtOnce(e.AtOnce), e.Pool,
			plural(strconv.Itoa(e.PoolSlots), "slot"), roundDuration(e.PoolTime), roundDuration(e.Path))
		if e.Slots > 0 {
			s += fmt.Sprintf("; the run slots allow %d: %s", e.Slots, why)
		}
		return s + ")"
	}
	s := fmt.Sprintf("%d (%s", e.Slots, why)
	if e.Pool != "" {
		s += fmt.Sprintf("; pool %q allows %s", e.Pool, fmtAtOnce(e.PoolAtOnce))
	}
	return s + ")"
}

// boundName names the bound an estimate used.
func boundName(e compiler.Estimate) string {
	if e.ByPool {
		return fmt.Sprintf("pool %q", e.Pool)
	}
	return "the run slots"
}

// fmtAtOnce writes a number of runs at once: "2", "1.5".
func fmtAtOnce(x float64) string {
	return strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64)
}

// plural is "1 slot", "2 slots", "1.5 slots".
func plural(n, word string) string {
	if n == "1" {
		return n + " " + word
	}
	return n + " " + word + "s"
}

// roundDuration prints a duration for a person: "61h", "20m", "1m30s".
func roundDuration(d time.Duration) string {
	switch {
	case d >= time.Hour:
		d = d.Round(time.Minute)
	case d >= time.Minute:
		d = d.Round(time.Second)
	case d >= time.Second:
		d = d.Round(100 * time.Millisecond)
	default:
		d = d.Round(time.Millisecond)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func runBackfill(ctx context.Context, io IO, path string, opts backfillOptions) error {
	if opts.from == "" || opts.to == "" {
		return usageErr("backfill: --from and --to are required")
	}
	if opts.wait && !opts.submit {
		return usageErr("backfill: --wait follows submitted runs: give --submit too")
	}
	if io.engine != nil && !opts.submit {
		return usageErr("backfill --engine: an engine's workers run submitted intervals: give --submit too")
	}
	load := loadPlan
	if opts.submit {
		load = loadPlanForWorkers
	}
	plan, err := load(io, path)
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	var st store.Store
	var q queue.Queue
	var loc store.Location
	switch {
	case opts.submit && !opts.dryRun:
		if st, q, loc, err = openQueue(ctx, io, &opts.state, path, "", stateRestartWait); err != nil {
			return err
		}
	default:
		if loc, err = opts.state.location(io, path); err != nil {
			return err
		}
		// A dry run reads the state if there is one, and never makes one.
		exists, err := loc.Exists()
		if err != nil {
			return usageErr("state %s: %v", loc, unwrapPathError(err))
		}
		if exists || !opts.dryRun {
			if st, err = openState(ctx, io, loc, false); err != nil {
				return err
			}
		}
	}
	if st != nil {
		defer st.Close()
		if q == nil {
			q = workQueue(st)
		}
	}
	mode := schedule.RebuildGaps
	switch {
	case opts.stale && opts.force:
		return usageErr("backfill: --stale rebuilds what is stale, --force everything: give one")
	case opts.stale:
		mode = schedule.RebuildStale
	case opts.force:
		mode = schedule.RebuildAll
	}
	bp, err := planBackfill(ctx, plan, opts.from, opts.to, st, q, mode)
	if err != nil {
		return err
	}
	bp.print(io, plan.Pipeline)
	if opts.dryRun {
		// Blocked intervals would not run: a dry run in CI fails on them.
		if count(bp.decisions, schedule.Blocked) > 0 {
			return silentExit(ExitFindings)
		}
		return nil
	}
	arts, err := opts.artifacts.path()
	if err != nil {
		return err
	}
	b := &batch{io: io, plan: plan, slots: bp.slots, later: "run the backfill again once a run ends"}
	if opts.submit {
		withArtifacts(plan, arts)
		base, err := filepath.Abs(filepath.Dir(path))
		if err != nil {
			return usageErr("%v", err)
		}
		if err := refuseForeignSinks(ctx, st, loc, plan, base); err != nil {
			return &exitError{Code: ExitFindings, Err: err}
		}
		launch, stop := submitLaunch(ctx, io, plan, base, q, opts.poll, opts.force)
		defer stop()
		b.launch, b.detach = launch, !opts.wait
		if io.engine != nil {
			e := opts.engine.get(io)
			if e == "" {
				return usageErr("backfill --submit: give the engine with --engine temporal://HOST:PORT or set %s", engineEnv)
			}
			b.launch = engineLaunch(io, io.engine, e, st, plan, base, opts.poll, opts.force)
		}
	} else {
		// One set of slots for every run: a pool (such as "backfill")
		// bounds the whole backfill, not each run.
		launch, stop := localLaunch(io, plan, path, st, loc, opts.seed, runtime.NewSlots(plan, opts.parallel), arts, opts.force)
		defer stop()
		b.launch = launch
	}
	res := b.run(ctx, bp.decisions)
	if res.interrupted {
		if opts.submit {
			return &exitError{Code: ExitFindings, Err: errors.New("backfill interrupted: the runs it submitted go on with the workers; run it again to hand over the rest")}
		}
		return &exitError{Code: ExitFindings, Err: errors.New("backfill interrupted")}
	}
	fmt.Fprintln(io.Stdout, res.summaryLine("backfill", count(bp.decisions, schedule.Skip), count(bp.decisions, schedule.Blocked),
		count(bp.decisions, schedule.Active)))
	// Intervals left for want of a run slot are not done, and nothing
	// else will do them: a person (or CI) must run the backfill again.
	if res.failed > 0 || res.blocked > 0 || res.noSlot > 0 || count(bp.decisions, schedule.Blocked) > 0 {
		return silentExit(ExitFindings)
	}
	return nil
}
