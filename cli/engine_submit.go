package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// Engine hands runs to another dispatch engine than the state's own queue
// (Temporal, in the pipec-temporal command). EngineMain gives it to pipec
// submit --due and pipec backfill --submit, which decide the intervals
// exactly as on the queue (the same state, the same schedule facts, the
// same output) and hand each one to it.
type Engine interface {
	// Submit records the run of one interval in st and hands it to the
	// engine that engine (the --engine value) names. A refusal is the
	// store's error: *store.RunBusyError when a run of the interval is in
	// progress (on the engine or in the state), *store.RunSlotsError when
	// max_active_runs runs of the pipeline are.
	Submit(ctx context.Context, engine string, st store.Store, r EngineRun) (store.Run, error)
}

// EngineRun is one interval to hand to an Engine: the compiled plan, the
// spec's folder (where tasks run), the interval and the value it was
// given as, and Force for a run that reuses nothing (store.Run.Forced).
type EngineRun struct {
	Plan     *compiler.Plan
	BaseDir  string
	Interval runtime.Interval
	Value    string
	Force    bool
}

// EngineMain is Main with submit --due and backfill --submit handing
// their runs to e instead of the state's queue: pipec-temporal runs
// pipec's own commands this way, so they take the same flags and print the
// same lines.
func EngineMain(args []string, io IO, e Engine) int {
	io.engine = e
	return Main(args, io)
}

// engineLaunch hands an interval to the engine and follows its run in the
// state as submitLaunch follows a queue's (its end, and "waiting for a
// worker" when that changes), reading the waiting from the run's log
// (runWaiting): the engine's workflow records it there, not in a queue.
func engineLaunch(io IO, e Engine, engine string, st store.Store, plan *compiler.Plan, base string,
	poll time.Duration, force bool) func(context.Context, runtime.Interval, func(string)) outcome {
	return func(ctx context.Context, iv runtime.Interval, started func(string)) outcome {
		run, err := e.Submit(ctx, engine, st, EngineRun{Plan: plan, BaseDir: base, Interval: iv, Value: iv.Key, Force: force})
		if o, ok := refused(plan, iv, err); ok {
			return o
		}
		if err != nil {
			return outcome{state: "error", why: err.Error()}
		}
		fmt.Fprintf(io.Stdout, "%s  submitted %s (%d tasks)\n", iv.Key, run.ID, len(plan.Tasks))
		started(run.ID)
		var w runWaiting
		return followQuietly(ctx, io, iv, run.ID, poll, nil, func(ctx context.Context) (store.RunState, string, error) {
			r, err := st.GetRun(ctx, run.ID)
			if err != nil {
				return "", "", err
			}
			evs, err := store.EventsAfter(ctx, st, run.ID, w.seq)
			if err != nil {
				return "", "", err
			}
			w.add(evs)
			return r.State, w.message(), nil
		})
	}
}

// runWaiting reads what a run dispatched through an engine waits for from
// its log, fed in order (add): the message of the last run.waiting event,
// until an event of the task it names follows (the task started again:
// its attempt's events). The workflow records run.waiting when the run
// starts waiting, about its first waiting task (queue.WaitingMessage), and
// again when the message changes; the queue keeps the same message in its
// own table and clears it on a claim of that task.
type runWaiting struct {
	seq  int64
	msg  string
	task string
}

func (w *runWaiting) add(evs []store.Event) {
	for _, ev := range evs {
		w.seq = max(w.seq, ev.Seq)
		switch {
		case ev.Kind == queue.EventRunWaiting:
			var p struct {
				Waiting string `json:"waiting"`
			}
			if json.Unmarshal(ev.Payload, &p) != nil {
				continue
			}
			w.msg, w.task = p.Waiting, waitingTask(p.Waiting)
		case w.msg != "" && ev.Task != "" && ev.Task == w.task:
			w.msg, w.task = "", ""
		}
	}
}

func (w *runWaiting) message() string { return w.msg }

// waitingTask is the task a queue.WaitingMessage is about.
func waitingTask(msg string) string {
	rest, ok := strings.CutPrefix(msg, "task ")
	if !ok {
		return ""
	}
	task, _, _ := strings.Cut(rest, ": ")
	return task
}
