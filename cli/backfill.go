package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/store"
)

type backfillOptions struct {
	execFlags
	from, to string
	dryRun   bool
}

func newBackfillCmd(io IO) *cobra.Command {
	var opts backfillOptions
	cmd := &cobra.Command{
		Use:   "backfill SPEC|PLAN --from DATE --to DATE [--dry-run]",
		Short: "Run every interval from --from to --to (inclusive), bounded; --dry-run prints the estimate",
		Long: "Backfill runs the intervals whose start lies between --from and --to, both included, at most\n" +
			"schedule.max_active_runs at a time (one at a time without it, or when a task reads an earlier\n" +
			"interval's artifact). Each interval is an ordinary run: completed work is reused. The runs\n" +
			"share their slots: a pool's slots and --parallel bound the whole backfill.\n" +
			"--dry-run launches nothing and prints the estimate: runs ÷ slots × time per run, the time per\n" +
			"run taken from this pipeline's finished runs in the state, else from the task timeouts along\n" +
			"the longest path.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.resolveSeed(cmd)
			return runBackfill(cmd.Context(), io, args[0], opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.from, "from", "", "start of the first interval (required)")
	f.StringVar(&opts.to, "to", "", "start of the last interval, included (required)")
	f.BoolVar(&opts.dryRun, "dry-run", false, "print the estimate and launch nothing")
	opts.register(cmd, "tasks running at once across the backfill (default: the number of CPUs)")
	return cmd
}

// backfillPlan is what a backfill will do.
type backfillPlan struct {
	plan      *compiler.Plan
	intervals []runtime.Interval
	slots     int
	slotsWhy  string
	perRun    time.Duration
	perRunWhy string
}

func planBackfill(ctx context.Context, plan *compiler.Plan, from, to string, loc store.Location) (*backfillPlan, error) {
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
	bp := &backfillPlan{plan: plan, slots: 1, slotsWhy: "no max_active_runs: one run at a time"}
	for iv := first; !iv.Start.After(last.Start); iv, _ = iv.Offset(1) {
		bp.intervals = append(bp.intervals, iv)
		if len(bp.intervals) > 100000 {
			return nil, usageErr("more than 100,000 intervals between %s and %s", from, to)
		}
	}
	if s := plan.Schedule; s != nil && s.MaxActiveRuns > 0 {
		bp.slots, bp.slotsWhy = s.MaxActiveRuns, "schedule max_active_runs"
	}
	for _, t := range plan.Tasks {
		for _, in := range t.Inputs {
			if in.Offset < 0 && bp.slots > 1 {
				bp.slots = 1
				bp.slotsWhy = fmt.Sprintf("one run at a time: task %s reads %s@%d, an earlier interval", t.Name, in.Artifact, in.Offset)
			}
		}
	}
	bp.perRun, bp.perRunWhy = historyPerRun(ctx, plan.Pipeline, loc)
	if bp.perRun == 0 {
		bp.perRun, bp.perRunWhy = timeoutPath(plan)
	}
	return bp, nil
}

// historyPerRun is the mean duration of the pipeline's succeeded runs.
func historyPerRun(ctx context.Context, pipeline string, loc store.Location) (time.Duration, string) {
	st, err := openState(ctx, loc, true)
	if err != nil {
		return 0, ""
	}
	defer st.Close()
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
	fmt.Fprintf(io.Stdout, "  slots:        %d (%s)\n", bp.slots, bp.slotsWhy)
	if bp.perRun == 0 {
		fmt.Fprintf(io.Stdout, "  time per run: %s\n", bp.perRunWhy)
		fmt.Fprintf(io.Stdout, "  estimate:     %d runs ÷ %d slots = %d waves of unknown length\n", n, bp.slots, (n+bp.slots-1)/bp.slots)
		return
	}
	// One estimate for backfills and the catchup-stampede rule.
	e := compiler.EstimateRuns(bp.plan, int64(n), int64(bp.slots), bp.perRun)
	fmt.Fprintf(io.Stdout, "  time per run: %s (%s)\n", roundDuration(bp.perRun), bp.perRunWhy)
	if e.ByPool {
		fmt.Fprintf(io.Stdout, "  estimate:     %d runs ÷ %d slots of pool %q × %s ≈ %s (the pool, not the %d run slots, bounds it)\n",
			n, e.PoolSlots, e.Pool, roundDuration(e.PoolTime), roundDuration(e.Total), bp.slots)
		return
	}
	fmt.Fprintf(io.Stdout, "  estimate:     %d runs ÷ %d slots × %s ≈ %s\n", n, bp.slots, roundDuration(bp.perRun), roundDuration(e.Total))
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
	plan, err := loadPlan(io, path)
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	loc, err := opts.state.location(io, path)
	if err != nil {
		return err
	}
	bp, err := planBackfill(ctx, plan, opts.from, opts.to, loc)
	if err != nil {
		return err
	}
	bp.print(io, plan.Pipeline)
	if opts.dryRun {
		return nil
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := openState(ctx, loc, false)
	if err != nil {
		return err
	}
	defer st.Close()
	// One set of slots for every run: a pool (such as "backfill") bounds the
	// whole backfill, not each run.
	slots := runtime.NewSlots(plan, opts.parallel)
	arts, err := opts.artifacts.path()
	if err != nil {
		return err
	}
	var mu sync.Mutex
	failed := 0
	sem := make(chan struct{}, bp.slots)
	var wg sync.WaitGroup
	for _, iv := range bp.intervals {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			sum, err := runtime.Run(ctx, runtime.Options{Plan: plan, BaseDir: filepath.Dir(path), Interval: iv.Key, Store: st,
				StatePath: loc.Path, Seed: opts.seed, Slots: slots, Environ: io.Environ(), Artifacts: arts})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				failed++
				fmt.Fprintf(io.Stdout, "%s  error: %v\n", iv.Key, err)
			case sum.Failed:
				failed++
				fmt.Fprintf(io.Stdout, "%s  %s FAILED (pipec events %s)\n", iv.Key, sum.Run.ID, sum.Run.ID)
			default:
				fmt.Fprintf(io.Stdout, "%s  %s succeeded\n", iv.Key, sum.Run.ID)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return &exitError{code: ExitFindings, err: errors.New("backfill interrupted")}
	}
	fmt.Fprintf(io.Stdout, "backfill: %d of %d run(s) succeeded\n", len(bp.intervals)-failed, len(bp.intervals))
	if failed > 0 {
		return silentExit(ExitFindings)
	}
	return nil
}
