package runtime

import (
	"context"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// A task's end starts the tasks that waited for it alone
//
// In a local run, a task that ends succeeded lets the scheduler start the
// tasks that waited only for it (dag.readyAfter). Their attempts are
// started (queued: token granted, no process yet) by the very store write
// that records its end (store.Handoff), so a chain of short tasks pays one
// commit per task instead of two. Nothing is ordered differently: the end
// commits no later than the starts, and no dependent's process starts
// before that write returned.
//
// Only the plain case is handed over: a task without outputs (one with
// outputs produces them after its end, and its dependents read them), and
// a dependent that will simply run (not blocked, adopted, or in an
// interval an earlier run touched, where whether it is reusable depends on
// the very end being recorded). Every other start is the dependent's own.

// handed is an attempt started for a task by the end of the task it waited
// for, and the inputs resolved for it then.
type handed struct {
	started store.Started
	inputs  []boundInput
}

// finishHandingOff records a succeeded attempt's end with the starts of
// the tasks it lets start; each gets its attempt in taskState.handed,
// which its engine reads once the scheduler starts it (after this task's
// engine returned).
func (r *runner) finishHandingOff(ctx context.Context, ts *taskState, ref store.AttemptRef, o store.Outcome) error {
	var next []*taskState
	var specs []store.AttemptSpec
	var inputs [][]boundInput
	if r.sched != nil && len(ts.t.Outputs) == 0 {
		for _, name := range r.sched.readyAfter(ts.t.Name) {
			d := r.tasks[name]
			if in, ok := r.startable(ctx, d); ok {
				next, specs, inputs = append(next, d), append(specs, r.attemptSpec(d.t)), append(inputs, in)
			}
		}
	}
	started, err := store.FinishAndStart(r.records, r.st, ref, r.kept(ts.t.Name, o), specs)
	if err != nil {
		return err
	}
	for i, d := range next {
		d.handed = &handed{started: started[i], inputs: inputs[i]}
	}
	return nil
}

// startable resolves the inputs of a task that will simply run (see
// above); false: it starts the usual way (runOne).
func (r *runner) startable(ctx context.Context, ts *taskState) ([]boundInput, bool) {
	name := ts.t.Name
	if _, ok := r.blocked[name]; ok {
		return nil, false
	}
	if _, ok := r.adopt[name]; ok || r.hasPrior || ctx.Err() != nil {
		return nil, false
	}
	inputs, why, err := r.resolveInputs(ctx, ts.t)
	if err != nil || why != "" {
		return nil, false
	}
	return inputs, true
}

// nextAttempt starts a task's next attempt, or takes the one handed to it.
func (r *runner) nextAttempt(ctx context.Context, ts *taskState) (store.Attempt, error) {
	if h := ts.handed; h != nil {
		ts.handed = nil
		return h.started.Attempt, h.started.Err
	}
	return r.startAttempt(ctx, r.attemptSpec(ts.t))
}

// dropHanded ends a handed attempt the task will not run: it never started.
func (r *runner) dropHanded(ctx context.Context, ts *taskState) {
	h := ts.handed
	ts.handed = nil
	if h == nil || h.started.Err != nil {
		return
	}
	_ = r.endAttempt(r.records, h.started.Attempt.AttemptRef, store.Outcome{State: store.AttemptFailed,
		Class: queue.ClassNotStarted, ExitCode: -1, ErrorTail: "never started: " + interrupted})
}

// attemptSpec is the store's record of a task's next attempt: queued, its
// token taken before it waits for a slot.
func (r *runner) attemptSpec(t *compiler.PlanTask) store.AttemptSpec {
	lease, _ := r.leaseOf(t)
	return store.AttemptSpec{Run: r.runID, Task: t.Name, Resource: r.resource, Worker: r.o.Worker, Host: r.self.Host,
		Boot: r.self.Boot, Lease: lease, Queued: true}
}

// kept is o, the end of an attempt of task, asked to be on stable storage
// when the task is not idempotent (store.Outcome.Durable): its start is,
// and an end a crash of the state took back would leave it looking
// started, an unknown for a person to settle although its end was seen.
func (r *runner) kept(task string, o store.Outcome) store.Outcome {
	if ts := r.tasks[task]; ts != nil && !ts.t.Idempotent {
		o.Durable = true
	}
	return o
}
