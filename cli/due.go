package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/schedule"
	"github.com/pipec/pipec/runtime/store"
)

// nowEnv overrides the wall clock of --due, as --now does (tests, and
// replaying what a cron tick at a given moment would have done).
const nowEnv = "PIPEC_NOW"

// dueNow is the moment --due judges what is due at: --now, else PIPEC_NOW,
// else the wall clock.
func dueNow(io IO, flag string) (time.Time, error) {
	v, from := flag, "--now"
	if v == "" && io.Getenv != nil {
		v, from = io.Getenv(nowEnv), nowEnv
	}
	if v == "" {
		return time.Now().UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, usageErr("%s %q is not an RFC 3339 time (such as 2024-01-06T00:00:00Z)", from, v)
	}
	return t.UTC(), nil
}

// workQueue is the workers' side of st (nil when it serves none), which
// tells a run handed to workers, in progress though it holds no lease,
// from a leftover.
func workQueue(st store.Store) queue.Queue {
	q, _ := st.(queue.Queue)
	return q
}

// dueRun is pipec run --due and pipec submit --due: what is due at now
// (schedule.Facts.Due), each interval run by launch, at most as many at
// once as max_active_runs leaves free beside the runs already in progress.
// onWorkers says launch hands intervals to workers; detach, that it
// returns once the last is handed over. Nothing due is exit code 0 with a
// line saying so; an interval blocked or a run failed is 1. dryRun prints
// what would be launched and launches nothing (st may then be nil: no
// state yet, which a dry run does not make).
func dueRun(ctx context.Context, io IO, plan *compiler.Plan, st store.Store, q queue.Queue, now time.Time,
	launch func(context.Context, runtime.Interval, func(string)) outcome, onWorkers, detach, dryRun bool) error {
	if plan.Schedule == nil {
		return usageErr("--due: pipeline %s has no schedule block, so nothing is ever due; run an interval with --interval", plan.Pipeline)
	}
	facts, err := schedule.Read(ctx, st, q, plan)
	if err != nil {
		return &exitError{Code: ExitFindings, Err: fmt.Errorf("reading the state: %w", err)}
	}
	d, err := facts.Due(ctx, now)
	if err != nil {
		return usageErr("--due: %v", err)
	}
	at := d.Now.Format(time.RFC3339)
	if !d.Any {
		fmt.Fprintf(io.Stdout, "nothing due at %s: the first interval, %s, is due at %s\n", at, d.First.Key, d.First.End.Format(time.RFC3339))
		return nil
	}
	mode := "catchup = false: the latest only"
	if d.Catchup {
		mode = fmt.Sprintf("catchup = true: %d due interval(s) from %s", len(d.Decisions), d.Decisions[0].Interval.Key)
	}
	fmt.Fprintf(io.Stdout, "due %s at %s: latest due interval %s (%s)\n", plan.Pipeline, at, d.Latest.Key, mode)
	printDecisions(io, d.Decisions)
	toRun := count(d.Decisions, schedule.Run)
	skipped, blocked, active := count(d.Decisions, schedule.Skip), count(d.Decisions, schedule.Blocked), count(d.Decisions, schedule.Active)
	if toRun == 0 {
		if blocked > 0 {
			fmt.Fprintf(io.Stdout, "nothing run: %d due interval(s) blocked\n", blocked)
			return silentExit(ExitFindings)
		}
		fmt.Fprintln(io.Stdout, "nothing due")
		return nil
	}
	slots, why := schedule.Slots(plan)
	inProgress := facts.ActiveRuns()
	free := slots - len(inProgress)
	if free <= 0 {
		var names []string
		for _, r := range inProgress {
			names = append(names, r.Run)
		}
		fmt.Fprintf(io.Stdout, "nothing started: %d interval(s) due, but %d run(s) are in progress (%s) and at most %d may be (%s): the next --due starts them\n",
			toRun, len(inProgress), strings.Join(names, ", "), slots, why)
		if blocked > 0 {
			return silentExit(ExitFindings)
		}
		return nil
	}
	fmt.Fprintf(io.Stdout, "  to run:       %d interval(s), %d at a time (%s", toRun, free, why)
	if len(inProgress) > 0 {
		fmt.Fprintf(io.Stdout, ", %d run(s) in progress", len(inProgress))
	}
	fmt.Fprintln(io.Stdout, ")")
	if toRun > 1 {
		// A catch-up is a backfill: the same estimate (and the one the
		// catchup-stampede rule quotes).
		perRun, perRunWhy := historyPerRun(ctx, plan.Pipeline, st)
		if perRun == 0 {
			perRun, perRunWhy = timeoutPath(plan)
		}
		if perRun > 0 {
			e := compiler.EstimateRuns(plan, int64(toRun), int64(free), perRun)
			fmt.Fprintf(io.Stdout, "  estimate:     %d runs ÷ %s × %s ≈ %s (bound: %s; time per run: %s)\n", toRun,
				plural(fmtAtOnce(e.AtOnce), "slot"), roundDuration(perRun), roundDuration(e.Total), dueBound(e), perRunWhy)
		}
	}
	if dryRun {
		var keys []string
		for _, d := range d.Decisions {
			if d.Action == schedule.Run {
				keys = append(keys, d.Interval.Key)
			}
		}
		how := "run here"
		if onWorkers {
			how = "hand to the workers"
		}
		fmt.Fprintf(io.Stdout, "dry run: would %s %d interval(s), %d at once: %s; nothing launched, the state is unchanged\n",
			how, toRun, free, strings.Join(keys, ", "))
		if blocked > 0 {
			return silentExit(ExitFindings)
		}
		return nil
	}
	b := &batch{io: io, plan: plan, slots: free, launch: launch, detach: detach, later: "the next --due starts it"}
	res := b.run(ctx, d.Decisions)
	if res.interrupted {
		if onWorkers {
			return &exitError{Code: ExitFindings, Err: errors.New("interrupted: the runs already submitted go on with the workers; the next --due hands over the rest")}
		}
		return &exitError{Code: ExitFindings, Err: errors.New("due runs interrupted")}
	}
	fmt.Fprintln(io.Stdout, res.summaryLine("due", skipped, blocked, active))
	if res.failed > 0 || res.blocked > 0 || blocked > 0 {
		return silentExit(ExitFindings)
	}
	return nil
}

// dueBound names the bound a catch-up's estimate used: the pool's, or the
// free run slots (the to-run line says why there are that many).
func dueBound(e compiler.Estimate) string {
	if e.ByPool {
		return fmt.Sprintf("pool %q: %s, its tasks' timeouts %s of a run's %s along the longest path", e.Pool,
			plural(strconv.Itoa(e.PoolSlots), "slot"), roundDuration(e.PoolTime), roundDuration(e.Path))
	}
	if e.Pool != "" {
		return fmt.Sprintf("the run slots; pool %q allows %s", e.Pool, fmtAtOnce(e.PoolAtOnce))
	}
	return "the run slots"
}
