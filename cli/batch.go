package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/internal/goreuse"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/objstore"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/schedule"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
)

// A batch runs the intervals a due run or a backfill decided to run
// (schedule.Decision), in order, at most slots at a time, each locally
// (runtime.Run) or handed to the workers (queue.Submit); it prints a
// progress line as each interval starts (with an ETA from the mean of the
// finished ones) and a result line as each ends. Run, submit and backfill
// share it.
type batch struct {
	io    IO
	plan  *compiler.Plan
	slots int
	// launch runs one interval to its end; started is called once its run
	// exists (or it could not be created), so intervals start in order.
	launch func(ctx context.Context, iv runtime.Interval, started func(run string)) outcome
	// detach: return once the last interval is launched instead of when
	// it ends (handed to workers without --wait).
	detach bool
	// later says, on the line of the intervals left for want of a run
	// slot, when they will run ("the next --due starts them").
	later string
}

// outcome is how one interval's run ended.
type outcome struct {
	run   string
	state string // "succeeded", "failed", "active" (another run holds it), noSlot, "error"
	why   string
	// everyInterval: an error that refuses every interval alike
	// (runtime.RefusedEveryInterval); the batch runs no more.
	everyInterval bool
}

// noSlot is the state of a launch the store refused for want of a run
// slot (a *store.RunSlotsError); why is the error's Detail. No run exists.
const noSlot = "noslot"

// batchResult counts what a batch did.
type batchResult struct {
	total, succeeded, failed, blocked, active, detached int
	// refused: intervals not run after one was refused as every one would be.
	refused int
	// noSlot counts the intervals left for want of a run slot.
	noSlot      int
	interrupted bool
}

// run executes the decisions to run; the others were printed already. An
// interval the store refuses for want of a run slot (the pipeline has
// max_active_runs runs in progress, counting other processes') is tried
// again when one of the batch's own runs ends; when none of them is
// running, it and the rest are left, on one line, for later (b.later).
func (b *batch) run(ctx context.Context, ds []schedule.Decision) batchResult {
	var res batchResult
	for _, d := range ds {
		if d.Action == schedule.Run {
			res.total++
		}
	}
	done := make([]chan struct{}, len(ds))
	outs := make([]outcome, len(ds))
	for i := range done {
		done[i] = make(chan struct{})
	}
	var mu sync.Mutex
	var durations time.Duration
	finished := 0
	closed := false // detached: the batch returned, nothing more is printed
	halted := false // an interval was refused as every one would be
	sem := make(chan struct{}, max(b.slots, 1))
	var wg sync.WaitGroup
	// inflight counts the batch's launches that have not ended; ends
	// counts those that ended, and ended receives a value as each ends (a
	// refused one excepted).
	inflight, ends := 0, 0
	ended := make(chan struct{}, len(ds))
	n := 0
	closeDone := func(k int) {
		select {
		case <-done[k]:
		default:
			close(done[k])
		}
	}
	for i, d := range ds {
		if d.Action != schedule.Run {
			closeDone(i)
			continue
		}
		// An interval that reads an earlier one of this batch waits for it
		// (before taking a slot) and is blocked when it did not succeed.
		blocked := ""
		for _, k := range d.Needs {
			select {
			case <-done[k]:
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				break
			}
			if o := outs[k]; o.state != string(store.RunSucceeded) && blocked == "" {
				blocked = fmt.Sprintf("reads interval %s, whose run %s", ds[k].Interval.Key, describeOutcome(o))
			}
		}
		if ctx.Err() == nil && blocked == "" {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
		}
		mu.Lock()
		h := halted
		mu.Unlock()
		if h && ctx.Err() == nil {
			if blocked == "" {
				<-sem
			}
			mu.Lock()
			res.refused = b.leaveRefused(ds[i:])
			mu.Unlock()
			for k := i; k < len(ds); k++ {
				closeDone(k)
			}
			break
		}
		if ctx.Err() != nil {
			res.interrupted = true
			closeDone(i)
			break
		}
		n++
		mu.Lock()
		if blocked != "" {
			res.blocked++
			outs[i] = outcome{state: "blocked", why: blocked}
			fmt.Fprintf(b.io.Stdout, "%s  blocked: %s\n", d.Interval.Key, blocked)
			mu.Unlock()
			closeDone(i)
			continue
		}
		line := fmt.Sprintf("interval %d of %d (%s), %d succeeded, %d failed", n, res.total, d.Interval.Key, res.succeeded, res.failed)
		if finished > 0 {
			mean := durations / time.Duration(finished)
			left := res.total - finished - res.blocked
			line += ", ETA " + roundDuration(mean*time.Duration(left)/time.Duration(max(b.slots, 1)))
		}
		fmt.Fprintln(b.io.Stdout, line)
		inflight++
		seen := ends
		mu.Unlock()
		// launch starts the interval's run and returns once it exists; a
		// refusal for want of a run slot is returned instead (its slot
		// in sem is given back, and it does not count as ended).
		launch := func() *outcome {
			started := make(chan struct{})
			var once sync.Once
			var refusal *outcome
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				o := b.launch(ctx, d.Interval, func(string) { once.Do(func() { close(started) }) })
				if o.state == noSlot {
					mu.Lock()
					inflight--
					mu.Unlock()
					<-sem
					refusal = &o
					once.Do(func() { close(started) })
					return
				}
				defer func() { ended <- struct{}{} }()
				defer func() { <-sem }()
				defer closeDone(i)
				once.Do(func() { close(started) })
				mu.Lock()
				defer mu.Unlock()
				inflight--
				ends++
				outs[i] = o
				if o.state == "detached" || closed {
					return
				}
				finished++
				durations += time.Since(t0)
				switch o.state {
				case string(store.RunSucceeded):
					res.succeeded++
					fmt.Fprintf(b.io.Stdout, "%s  %s succeeded\n", d.Interval.Key, o.run)
				case "active":
					res.active++
					fmt.Fprintf(b.io.Stdout, "%s  skipped: %s\n", d.Interval.Key, o.why)
				case string(store.RunFailed):
					res.failed++
					fmt.Fprintf(b.io.Stdout, "%s  %s FAILED (pipec events %s)\n", d.Interval.Key, o.run, o.run)
				default:
					res.failed++
					fmt.Fprintf(b.io.Stdout, "%s  error: %s\n", d.Interval.Key, o.why)
					halted = halted || o.everyInterval
				}
			}()
			<-started
			return refusal
		}
		refused := launch()
		for refused != nil {
			mu.Lock()
			busy, now := inflight, ends
			mu.Unlock()
			if now == seen {
				// Nothing of the batch ended since this launch began: when
				// none of its runs is going, the slots are others'.
				if busy == 0 {
					break
				}
				// Else try again when one ends (a value left by one that
				// ended before only costs a try).
				select {
				case <-ended:
				case <-ctx.Done():
				}
			}
			if ctx.Err() == nil {
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
				}
			}
			if ctx.Err() != nil {
				break
			}
			mu.Lock()
			inflight++
			seen = ends
			mu.Unlock()
			refused = launch()
		}
		if ctx.Err() != nil {
			res.interrupted = true
			closeDone(i)
			break
		}
		if refused != nil {
			// None of the batch's runs is going and the runs holding the
			// slots are others': this interval and the rest wait for later.
			mu.Lock()
			res.noSlot = b.leaveForSlot(ds[i:], *refused)
			for k := i; k < len(ds); k++ {
				if ds[k].Action == schedule.Run {
					outs[k] = outcome{state: noSlot, why: refused.why}
				}
				closeDone(k)
			}
			mu.Unlock()
			break
		}
	}
	if b.detach && !res.interrupted {
		// Handed over: what is still running goes on with the workers.
		mu.Lock()
		closed = true
		for i, d := range ds {
			if d.Action == schedule.Run && outs[i].state == "" {
				res.detached++
			}
		}
		mu.Unlock()
		return res
	}
	wg.Wait()
	if ctx.Err() != nil {
		res.interrupted = true
	}
	return res
}

// leaveForSlot prints the line of the intervals to run in ds (the first
// one refused for want of a run slot: refused says why) that the batch
// leaves for later, and returns how many.
func (b *batch) leaveForSlot(ds []schedule.Decision, refused outcome) int {
	keys := toRun(ds)
	fmt.Fprintf(b.io.Stdout, "%s  skipped: no free run slot: %s; %s\n", keys[0], refused.why, b.later)
	b.printLeft(keys[1:], "skipped: no free run slot")
	return len(keys)
}

// leaveRefused prints the line of the intervals to run in ds, which the
// batch does not run since an earlier one was refused as each of them
// would be, and returns how many.
func (b *batch) leaveRefused(ds []schedule.Decision) int {
	keys := toRun(ds)
	b.printLeft(keys, "not run: each interval would be refused as the one above")
	return len(keys)
}

// toRun is the keys of the intervals to run in ds.
func toRun(ds []schedule.Decision) []string {
	var keys []string
	for _, d := range ds {
		if d.Action == schedule.Run {
			keys = append(keys, d.Interval.Key)
		}
	}
	return keys
}

// printLeft prints, on one line, the intervals keys and what became of
// them: the one, or the first to the last with their count.
func (b *batch) printLeft(keys []string, what string) {
	switch len(keys) {
	case 0:
	case 1:
		fmt.Fprintf(b.io.Stdout, "%s  %s\n", keys[0], what)
	default:
		fmt.Fprintf(b.io.Stdout, "%s to %s (%d)  %s\n", keys[0], keys[len(keys)-1], len(keys), what)
	}
}

func describeOutcome(o outcome) string {
	switch {
	case o.state == "blocked":
		return "was blocked"
	case o.run == "":
		return "did not start: " + o.why
	case o.state == "active":
		return o.run + " is another's, still in progress"
	}
	return o.run + " " + o.state
}

// localLaunch runs an interval in this process, as pipec run does; slots
// are shared by every run of the batch (a pool bounds all of them). stop
// ends the goroutines the batch's runs kept, once no run is left.
func localLaunch(io IO, plan *compiler.Plan, path string, st store.Store, loc store.Location, seed uint64, slots *runtime.Slots,
	arts string, force bool) (launch func(context.Context, runtime.Interval, func(string)) outcome, stop func()) {
	objects := new(objstore.Clients) // one for every run of the batch
	shown := new(sink.Shown)
	gos := new(goreuse.Pool)
	batch := runtime.Options{Plan: plan, BaseDir: filepath.Dir(path), Store: st,
		StatePath: loc.Path, Seed: seed, Slots: slots, Environ: io.Environ(), Artifacts: arts, MaxActiveRuns: maxActiveRuns(plan),
		ObjectStores: objects, SinksShown: shown, Goroutines: gos, OnStateSilent: (&stateSilence{w: io.Stderr}).told, Force: force}
	// Derived once for every run; when it cannot be, each run derives its
	// own and says why.
	batch.Setup, _ = runtime.PreparePlan(batch)
	return func(ctx context.Context, iv runtime.Interval, started func(string)) outcome {
		o := batch
		o.Interval = iv.Key
		o.OnEvent = func(ev runtime.Event) {
			if ev.Kind == store.EventRunCreated {
				started(ev.Run)
			}
		}
		sum, err := runtime.Run(ctx, o)
		if o, ok := refused(plan, iv, err); ok {
			return o
		}
		switch {
		case err != nil && sum == nil:
			return outcome{state: "error", why: err.Error(), everyInterval: runtime.RefusedEveryInterval(err)}
		case err != nil:
			return outcome{run: sum.Run.ID, state: "error", why: err.Error()}
		case sum.Failed:
			return outcome{run: sum.Run.ID, state: string(store.RunFailed)}
		}
		return outcome{run: sum.Run.ID, state: string(store.RunSucceeded)}
	}, gos.Close
}

// refused is the outcome of a run the store would not create: its interval
// is another run's (active), or the pipeline has no free run slot.
func refused(plan *compiler.Plan, iv runtime.Interval, err error) (outcome, bool) {
	var busy *store.RunBusyError
	var full *store.RunSlotsError
	switch {
	case errors.As(err, &busy):
		return outcome{run: busy.Run, state: "active", why: busyMessage(plan.Pipeline, iv.Key, busy)}, true
	case errors.As(err, &full):
		return outcome{state: noSlot, why: full.Detail()}, true
	}
	return outcome{}, false
}

// maxActiveRuns is the bound the store holds a pipeline's runs to
// (store.NewRun.MaxActive): the schedule's max_active_runs, 0 (none)
// without one. Every run pipec creates passes it, so runs started by any
// number of processes (two cron hosts' --due, a backfill, pipec submit)
// never exceed it together.
func maxActiveRuns(plan *compiler.Plan) int {
	if plan.Schedule == nil {
		return 0
	}
	return plan.Schedule.MaxActiveRuns
}

// submission is what pipec submit records for one interval: the run, its
// plan, the spec's folder and its tasks (queue.PlanTasks).
func submission(plan *compiler.Plan, base string, iv runtime.Interval, value string, force bool) queue.Submission {
	return queue.Submission{
		Run: store.NewRun{Pipeline: plan.Pipeline, Interval: iv.Key, IntervalStart: iv.Start, IntervalEnd: iv.End,
			CodeVersion: plan.CodeVersion, PlanDigest: plan.Digest, TaskDigests: plan.TaskDigests(), Forced: force,
			MaxActive: maxActiveRuns(plan)},
		Plan: plan.Marshal(), BaseDir: base, Interval: value, Tasks: queue.PlanTasks(plan),
	}
}

// submitLaunch hands an interval to the workers and follows its run
// quietly (its end, and "waiting for a worker" when that changes); with
// detach, the last interval of the batch is not followed. The followers
// share one listener for run ends, held until stop (before the store is
// closed: closing it waits for the listener's connection).
func submitLaunch(ctx context.Context, io IO, plan *compiler.Plan, base string, q queue.Queue, poll time.Duration, force bool) (
	launch func(context.Context, runtime.Interval, func(string)) outcome, stop func()) {
	listenCtx, stop := context.WithCancel(ctx)
	ends := newRunEnds(q)
	return func(ctx context.Context, iv runtime.Interval, started func(string)) outcome {
		ends.start(listenCtx)
		run, err := q.Submit(ctx, submission(plan, base, iv, iv.Key, force))
		if o, ok := refused(plan, iv, err); ok {
			return o
		}
		if err != nil {
			return outcome{state: "error", why: err.Error()}
		}
		fmt.Fprintf(io.Stdout, "%s  submitted %s (%d tasks)\n", iv.Key, run.ID, len(plan.Tasks))
		started(run.ID)
		read := statusReader(q)
		return followQuietly(ctx, io, iv, run.ID, poll, ends, func(ctx context.Context) (store.RunState, string, error) {
			rs, err := read(ctx, run.ID)
			return rs.Run.State, rs.Waiting, err
		})
	}, stop
}

// followQuietly follows a handed-over run until it ends: it prints
// each change of what the run waits for, and its end; look reads the run's
// state and waiting message every poll (each look within lookTimeout), and
// as any run ends when ends can tell (nil: every poll only). An outage of
// the state is said, and ridden out (stateOutage). A cancelled ctx
// detaches.
func followQuietly(ctx context.Context, io IO, iv runtime.Interval, run string, poll time.Duration, ends *runEnds,
	look func(context.Context) (store.RunState, string, error)) outcome {
	waiting := ""
	t := time.NewTicker(max(poll, 10*time.Millisecond))
	defer t.Stop()
	outage := stateOutage{w: io.Stdout, prefix: iv.Key + "  ", run: run}
	for {
		ended := ends.wait()
		lctx, cancel := context.WithTimeout(ctx, lookTimeout)
		state, now, err := look(lctx)
		cancel()
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, store.ErrNotFound):
			return outcome{run: run, state: "error", why: err.Error()}
		case err != nil:
			outage.failed(err)
		default:
			outage.answered()
		}
		if err == nil {
			if now != waiting {
				waiting = now
				if waiting != "" {
					fmt.Fprintf(io.Stdout, "%s  %s: %s\n", iv.Key, run, waiting)
				}
			}
			if state != store.RunRunning {
				return outcome{run: run, state: string(state)}
			}
		}
		select {
		case <-ctx.Done():
			return outcome{run: run, state: "detached"}
		case <-t.C:
		case <-ended:
		}
	}
}

// printDecisions prints what will not run, a stretch of like intervals
// as one line ("skip 2024-01-01 to 2024-01-03 (3): complete at …"), an
// active or blocked interval on a line of its own.
func printDecisions(io IO, ds []schedule.Decision) {
	for i := 0; i < len(ds); {
		d := ds[i]
		if d.Action == schedule.Run {
			i++
			continue
		}
		if d.Action != schedule.Skip {
			fmt.Fprintf(io.Stdout, "  %s %s: %s\n", d.Action, d.Interval.Key, d.Why)
			i++
			continue
		}
		j := i + 1
		for j < len(ds) && ds[j].Action == schedule.Skip && ds[j].Kind == d.Kind {
			j++
		}
		if j == i+1 {
			fmt.Fprintf(io.Stdout, "  skip %s: %s\n", d.Interval.Key, d.Why)
		} else {
			fmt.Fprintf(io.Stdout, "  skip %s to %s (%d): %s\n", d.Interval.Key, ds[j-1].Interval.Key, j-i, d.Kind)
		}
		i = j
	}
}

// count counts the decisions of an action.
func count(ds []schedule.Decision, a schedule.Action) int {
	n := 0
	for _, d := range ds {
		if d.Action == a {
			n++
		}
	}
	return n
}

// summaryLine is the batch's last line: "backfill: 3 of 3 run(s)
// succeeded; 2 skipped, 1 blocked".
func (r batchResult) summaryLine(what string, skipped, blocked, active int) string {
	s := fmt.Sprintf("%s: %d of %d run(s) succeeded", what, r.succeeded, r.total)
	var more []string
	if r.failed > 0 {
		more = append(more, fmt.Sprintf("%d failed", r.failed))
	}
	if r.detached > 0 {
		more = append(more, fmt.Sprintf("%d running on the workers", r.detached))
	}
	if skipped > 0 {
		more = append(more, fmt.Sprintf("%d skipped", skipped))
	}
	if n := blocked + r.blocked; n > 0 {
		more = append(more, fmt.Sprintf("%d blocked", n))
	}
	if n := active + r.active; n > 0 {
		more = append(more, fmt.Sprintf("%d left to the run in progress", n))
	}
	if r.noSlot > 0 {
		more = append(more, fmt.Sprintf("%d left for want of a run slot", r.noSlot))
	}
	if r.refused > 0 {
		more = append(more, fmt.Sprintf("%d not run (refused alike)", r.refused))
	}
	if len(more) > 0 {
		s += "; " + strings.Join(more, ", ")
	}
	return s
}
