package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/artifacts"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/retry"
	"github.com/pipec/pipec/runtime/store"
)

// Visit is one task's turn on one worker, for pipec worker: the worker has
// claimed the task of a run recorded by pipec submit and runs it here
// exactly as a local run runs a task (inputs resolved in the store, staged,
// audited, published with its token), retrying on this worker as the retry
// policy says. Where a visit differs from a local run's task:
//
//   - the run exists already (Run); the visit neither creates nor finishes
//     it, and takes no lease on the interval (the workers share the run);
//   - the retry policy counts this visit's attempts only (AttemptBase is how
//     many the task made before, on any worker), as the failover model does;
//   - an attempt whose lease expired is not relaunched here: this worker was
//     unreachable (stopped, partitioned) and another worker takes the task
//     over, so the process is stopped and the visit ends with LeaseLost.
type Visit struct {
	Options
	// Run is the run's id; Task the task to run.
	Run  string
	Task string
	// AttemptBase is how many attempts the task made in the run before
	// this visit.
	AttemptBase int
	// Started is the visit's first attempt when the worker's claim started
	// it (queue.AttemptStarter): the first attempt uses it instead of
	// starting one.
	Started *store.Attempt
	// Prior, when HasPrior, are the task's attempts on the run's resource
	// as the claim read them (queue.Claim.Prior): the visit does not read
	// them again.
	Prior    []store.Attempt
	HasPrior bool
	// Held, when set, confirms that the dispatcher still gives this visit
	// its task. A claim whose transaction read the task's attempts and
	// started its first one (Prior, Started) fences a stale visit in the
	// store; a dispatcher that cannot (an SQLite claim; Temporal, which
	// times an activity out on its own) sets Held, since a worker learns
	// that its visit was given up only from its next heartbeat. The visit
	// asks Held after reading the task's earlier attempts and before
	// ending any of their processes, and before a non-idempotent attempt's
	// process starts. A yes after the read means no later visit existed
	// when the read was made, so what this visit ends is never a later
	// visit's. An error stops the visit as a lost lease, with nothing more
	// started.
	Held func(context.Context) error
}

// VisitResult is how a visit ended.
type VisitResult struct {
	// Task is the task's result (succeeded, failed, not run), as in a run's
	// summary.
	Task TaskResult
	// LeaseLost: an attempt's lease expired during the visit; the outcome
	// belongs to whichever worker took the task over.
	LeaseLost bool
	// Deterministic: the last failure is of a deterministic class (it would
	// fail the same anywhere: no failover), or the run's retry budget
	// refused to retry it (a failover would be one more retry).
	Deterministic bool
	// End is the end of the visit's last attempt, not recorded yet: the
	// worker hands it to queue.Queue.Finish (queue.Result.End), which
	// records it in the transaction that ends the visit. Nil when the visit
	// started no attempt.
	End *queue.AttemptEnd
	// Unused is Visit.Started when no attempt ran (the task was not run,
	// or the visit stopped first): the worker hands it back
	// (queue.Result.Unused).
	Unused *store.AttemptRef
	// StoreTransient: the task failed because the state could not record
	// it, and every failure of the state in the visit was one the next
	// visit will not meet: of its reach (a restart, a network cut:
	// store.ErrUnreachable), or a record this visit made that the state no
	// longer has (a crash of its server took back its last commits); none
	// a refusal of what was asked, which would refuse the next visit too.
	StoreTransient bool
}

// Ended is how a visit ends in its queue (End and Unused aside), whoever
// dispatched it, and what its worker says of it ("" for nothing). err is
// RunVisit's. A lost lease and the dispatcher's own causes (a shutdown, a
// takeover) are the dispatcher's to tell first.
//
// A visit the state could not record because it could not reach it (a
// database restart, a network cut, while the task ran), or because it lost
// what the visit had recorded (StoreTransient), is the worker's failure,
// not the task's, and ends as a lost lease does:
// the task goes back to the queue, and the next visit settles what this
// one left (settleVisit), as the next run of an interval does after a
// local run the state failed. A state that refused what was asked fails
// the task (class store), as it would refuse the next visit too: handing
// it back would run the task again and again.
func (res VisitResult) Ended(err error, worker string) (queue.Result, string) {
	t := res.Task
	switch {
	case err != nil:
		return queue.Result{Ending: queue.Failed, Deterministic: true, Reason: err.Error()}, ""
	case t.State == TaskSucceeded:
		return queue.Result{Ending: queue.Succeeded}, fmt.Sprintf("%s on %s", t.State, worker)
	case t.State == TaskReused:
		return queue.Result{Ending: queue.Succeeded, Reason: "reused (" + t.Reason + ")"}, fmt.Sprintf("%s on %s", t.State, worker)
	case t.State == TaskUnknown:
		return queue.Result{Ending: queue.Failed, Deterministic: true, Reason: "unknown: " + t.Reason}, "not run: " + t.Reason
	case t.State == TaskNotRun:
		return queue.Result{Ending: queue.NotRun, Reason: t.Reason}, "not run: " + t.Reason
	case t.Class == retry.Store && res.StoreTransient:
		why := fmt.Sprintf("the state could not record the visit of %s (%s)", worker, t.Error)
		return queue.Result{Ending: queue.LeaseLost, Reason: why}, "stopped here: " + why + "; the task goes back to the queue"
	}
	// How its process ended says more than the retry's verdict alone
	// ("unclassified (exit code 1): the task has no retry policy").
	why, prefix := t.Reason, t.Class
	switch {
	case t.Class == classStart:
		prefix = cmp.Or(t.Ending, prefix) // "could not start: …"
	case t.Ending != "":
		prefix = strings.TrimSpace(prefix + " (" + t.Ending + ")")
	}
	if prefix != "" {
		why = prefix + ": " + why
	}
	return queue.Result{Ending: queue.Failed, Deterministic: res.Deterministic, Reason: why}, fmt.Sprintf("failed on %s (%s)", worker, why)
}

// visitEnds keeps a visit's last attempt's end for the worker's Finish.
//
// In a local run an attempt's end is recorded when its process ends, then
// its outputs are audited and published. In a visit, the end of the last
// attempt is recorded by the worker's Finish, in the transaction that also
// ends the visit and advances the DAG, so a worker killed in between cannot
// leave a succeeded attempt whose task runs again: either both are recorded
// or neither is (then the claim expires and the task runs again under a new
// token, fenced as any relaunch). A succeeded attempt's outputs are
// therefore audited and published before its end is recorded; its lease is
// renewed meanwhile, so a long check does not make it unknown. An attempt
// followed by another (a retry on this worker) is recorded before the next
// one starts.
//
// Only the visit's task goroutine uses it.
type visitEnds struct {
	pending *queue.AttemptEnd
	// started is the claim's attempt; offered to the first attempt only,
	// used once it took it.
	started       *store.Attempt
	offered, used bool
	// released: ended by the visit itself (releaseClaim).
	released bool
}

// visiting reports whether the engine runs a worker's visit (RunVisit)
// rather than a task of a local run.
func (r *runner) visiting() bool { return r.ends != nil }

// startAttempt is the store's StartAttempt, except that a visit's first
// attempt takes the one its claim started (queue.AttemptStarter).
func (r *runner) startAttempt(ctx context.Context, spec store.AttemptSpec) (store.Attempt, error) {
	if v := r.ends; v != nil && v.started != nil && !v.offered {
		v.offered = true
		a := *v.started
		if a.Run == spec.Run && a.Task == spec.Task && a.Resource == spec.Resource && a.State == store.AttemptQueued {
			v.used = true
			r.mu.Lock()
			r.attemptRecorded = true
			r.mu.Unlock()
			return a, nil
		}
		// Not the attempt this one would start: the worker hands it back.
	}
	a, err := r.st.StartAttempt(ctx, spec)
	if err == nil {
		r.mu.Lock()
		r.attemptRecorded = true
		r.mu.Unlock()
	}
	return a, err
}

// unused is the claim's attempt when the visit did not run it and has not
// ended it (releaseClaim).
func (v *visitEnds) unused() *store.AttemptRef {
	if v.started == nil || v.used || v.released {
		return nil
	}
	ref := v.started.AttemptRef
	return &ref
}

// releaseClaim ends the claim's attempt, unstarted, when the visit
// completes its task from an earlier attempt (reused, adopted) instead of
// running it, before anything of that attempt is published: the claim's
// attempt is the task's newest grant, and a grant fences the publishes of
// every older attempt (fence at grant) unless it ended without starting.
// Left to the worker's Finish, it would fence them, and the run would
// succeed with nothing published. If the state refuses, the worker's
// Finish hands it back as usual.
func (r *runner) releaseClaim(ctx context.Context) {
	if r.ends == nil {
		return
	}
	ref := r.ends.unused()
	if ref == nil {
		return
	}
	r.ends.offered = true // never the first attempt now
	err := r.st.FinishAttempt(ctx, *ref, queue.UnusedOutcome())
	r.ends.released = err == nil
}

// endAttempt records an attempt's end, or, in a visit, keeps it for the
// worker's Finish (recording the previous one first).
func (r *runner) endAttempt(ctx context.Context, ref store.AttemptRef, o store.Outcome) error {
	o = r.kept(ref.Task, o)
	if r.ends == nil {
		return r.st.FinishAttempt(ctx, ref, o)
	}
	r.flushEnd(ctx)
	o.ErrorTail = r.red.String(o.ErrorTail) // as redactingStore would
	r.ends.pending = &queue.AttemptEnd{Ref: ref, Outcome: o}
	return nil
}

// flushEnd records a kept attempt end now: another attempt follows it.
func (r *runner) flushEnd(ctx context.Context) {
	if r.ends == nil || r.ends.pending == nil {
		return
	}
	e := r.ends.pending
	r.ends.pending = nil
	_ = r.st.FinishAttempt(r.records, e.Ref, e.Outcome)
}

// produceThenEnd is a visit's succeeded attempt: its outputs are audited and
// published under its lease, then its end is kept for the worker's Finish.
func (r *runner) produceThenEnd(ctx context.Context, ts *taskState, l *launched) {
	stop := make(chan struct{})
	renewed := make(chan struct{})
	if l.ran == nil && len(ts.t.Outputs) > 0 {
		// Marked running with a lease, and there is an audit to wait for.
		go func() {
			defer close(renewed)
			lease := r.o.DefaultLease
			if hb := ts.t.Heartbeat; hb != nil {
				if d, err := time.ParseDuration(hb.Lease); err == nil && d > 0 {
					lease = d
				}
			}
			t := time.NewTicker(max(lease/3, 10*time.Millisecond))
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					_ = r.st.RenewLease(r.records, l.a.AttemptRef, l.a.Token, 0)
				}
			}
		}()
	} else {
		close(renewed)
	}
	r.produce(ctx, ts.t, l, false)
	close(stop)
	<-renewed
	_ = r.endAttempt(ctx, l.a.AttemptRef, store.Outcome{State: store.AttemptSucceeded, Ran: l.ran, Reads: readsOf(l.inputs)})
	if l.markErr == nil {
		r.ends.pending.Outcome.Was = &l.recorded
	}
	r.emitStore(store.EventAttemptFinished, ts.t.Name, l.a.Number, map[string]any{"state": "succeeded", "exit_code": 0})
}

// settleVisit asks the task's earlier attempts, in earlier runs of the
// interval and earlier visits of this run (the claim's own attempt,
// started, aside), what a local run asks them at its start: their orphans
// on this machine are ended, and a non-idempotent task's unseen or
// succeeded attempt decides it (settlePrior).
func (r *runner) settleVisit(ctx context.Context, ts *taskState, v Visit) error {
	var err error
	if r.stateID, err = r.st.StateID(ctx); err != nil {
		return err
	}
	started := v.Started
	as := slices.Clone(v.Prior)
	if !v.HasPrior {
		if as, err = r.st.TaskAttempts(ctx, r.resource, ts.t.Name); err != nil {
			return err
		}
	}
	as = slices.DeleteFunc(as, func(a store.Attempt) bool { return started != nil && a.AttemptRef == started.AttemptRef })
	r.hasPrior = len(as) > 0
	var open []store.Attempt
	for _, a := range as {
		if !a.State.Finished() {
			open = append(open, a)
		}
	}
	if len(open) > 0 {
		if err := r.confirmHeld(ctx); err != nil {
			return err
		}
	}
	if err := r.endOrphans(ctx, open); err != nil {
		return err
	}
	if len(r.pubsOf) > 0 {
		if err := r.raiseAboveSinks(ctx); err != nil {
			return err
		}
	}
	return r.settlePrior(ctx, ts, as)
}

// errNotHeld: the dispatcher gave the visit's task to another visit
// (Visit.Held).
var errNotHeld = errors.New("the dispatcher gave the task to another visit")

// confirmHeld asks Visit.Held, if set; a no makes the visit a lost lease.
func (r *runner) confirmHeld(ctx context.Context) error {
	if r.held == nil {
		return nil
	}
	if err := r.held(ctx); err != nil {
		r.leaseLost.Store(true)
		return fmt.Errorf("%w: %v", errNotHeld, err)
	}
	return nil
}

// Classes of a task whose process succeeded but whose outputs were not
// made visible (outputsFailed).
const (
	ClassCheck   = "check"
	ClassPublish = "publish"
	// ClassOutput: an output never became a version (a link or a device
	// in its folder).
	ClassOutput = "output"
	// ClassDisk: an output could not be frozen on the worker's machine
	// (its disk full or read-only, an I/O error): the machine's failure,
	// not the task's, so the task fails over.
	ClassDisk = "disk"
)

// outputsFailed says why the task's outputs are not visible although it
// ran ("" when they are): a check failed, the artifact store or the state
// refused a version, a publish errored or was not made.
func (r *runner) outputsFailed(t *compiler.PlanTask) (class, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	notRun := ""
	for _, out := range t.Outputs {
		for _, c := range r.checksOf[out] {
			cr := r.checks[c.Name]
			switch {
			case cr == nil || cr.State == CheckPassed:
			case cr.State == CheckFailed:
				return ClassCheck, fmt.Sprintf("check %s of %s: %s", c.Name, out, cr.Reason)
			case notRun == "":
				notRun = fmt.Sprintf("check %s of %s: %s", c.Name, out, cr.Reason)
			}
		}
		if line, ok := r.unreadable[out]; ok {
			return ClassOutput, "output " + line
		}
	}
	// A check that did not run says why in its reason, but the class is
	// what kept it from running: a version the state could not record is
	// the state's failure, tried again, not a check's, which is not.
	if r.artsErr != "" {
		return ClassArtifacts, r.artsErr
	}
	if r.diskErr != "" {
		return ClassDisk, r.diskErr
	}
	if r.storeErr != "" {
		return retry.Store, r.storeErr
	}
	if notRun != "" {
		return ClassCheck, notRun
	}
	for _, p := range r.publishes {
		if slices.Contains(t.Outputs, p.Artifact) && (p.Outcome == PublishError || p.Outcome == PublishNotRun) {
			return ClassPublish, fmt.Sprintf("publish %s to sink %s: %s", p.Name, p.Sink, p.Error)
		}
	}
	return "", ""
}

// RunVisit runs one visit. The error is for a visit that could not be
// carried out at all (unknown task, bad interval); task failures are in the
// result.
func RunVisit(ctx context.Context, v Visit) (VisitResult, error) {
	o := v.Options
	if o.Plan == nil || o.Store == nil || v.Run == "" {
		return VisitResult{}, errors.New("runtime: a visit needs a plan, a store and a run")
	}
	setup := o.Setup
	if !setup.fits(o) {
		setup = nil
	}
	var iv Interval
	var err error
	if known, ok := setup.intervalOf(o); ok {
		iv = known
	} else if iv, err = ResolveInterval(o.Plan.Schedule, o.Interval); err != nil {
		return VisitResult{}, err
	}
	r, err := newRunner(o, iv, v.Task, setup)
	if err != nil {
		return VisitResult{}, err
	}
	defer r.endGoroutines()
	// A visit waits for a state server that refuses connections (a
	// restart) as a local run does, for as long as its records may wait
	// once it is stopped: a worker's lease, past which its claim is
	// another's anyway. It failed its task at once before.
	ctx = store.WaitingForServer(ctx, cmp.Or(o.RecordWithin, DefaultRecordWithin))
	ts := r.tasks[v.Task]
	if ts == nil {
		return VisitResult{}, fmt.Errorf("runtime: the plan has no task %q", v.Task)
	}
	r.runID, r.runCtx = v.Run, ctx
	defer r.startRecords(ctx)()
	// Asked of local artifacts alone: the answer walks the whole plan.
	if r.artsLocal {
		if why := needsSharedArtifacts(o.Plan, ts.t); why != "" {
			// A clear refusal rather than versions kept on this worker's
			// disk, where another worker would look for them in vain.
			r.taskFailed(ctx, ts, "", 0, "", "no shared artifact store: "+why+"; set artifacts in the spec or give the "+
				"workers --artifacts DIR, a folder they all mount")
			return VisitResult{Task: ts.res, Deterministic: true}, nil
		}
	}
	r.visitBase, r.held = v.AttemptBase, v.Held
	r.ends = &visitEnds{started: v.Started}
	r.leases = newLeaseWatch(r)
	leaseCtx, stopLeases := context.WithCancel(ctx)
	leaseDone := make(chan struct{})
	go func() { r.leases.loop(leaseCtx); close(leaseDone) }()
	r.mu.Lock()
	ts.state = taskRunning
	r.mu.Unlock()
	if err := r.settleVisit(ctx, ts, v); errors.Is(err, errNotHeld) {
		r.taskFailed(ctx, ts, retry.LeaseExpired, 0, err.Error(), "not run here: another visit has the task")
	} else if err != nil {
		r.noteStore(err)
		r.taskFailed(ctx, ts, retry.Store, 0, err.Error(), "its earlier attempts could not be settled")
	} else if err := r.ownOutputs(ctx, ts.t); err != nil {
		var foreign *artifacts.ForeignOwnerError
		r.mu.Lock()
		ts.final = errors.As(err, &foreign)
		r.mu.Unlock()
		r.taskFailed(ctx, ts, ClassArtifacts, 0, "", "not run: "+err.Error())
	} else if err := r.sinksTake(ctx, ts.t); err != nil {
		r.mu.Lock()
		ts.final = true // the same on every worker
		r.mu.Unlock()
		r.taskFailed(ctx, ts, ClassPublish, 0, "", "not run: "+err.Error())
	} else {
		r.runOne(ctx, ts)
	}
	r.drainZombies()
	stopLeases()
	<-leaseDone
	deterministic := false
	if st := ts.state; st == TaskSucceeded || st == TaskReused {
		// Ran, but what it made is not visible: the task failed, as a
		// local run's summary fails the run for the same reasons.
		if class, why := r.outputsFailed(ts.t); why != "" {
			r.taskFailed(ctx, ts, class, 0, why, "its outputs were not published: "+why)
			deterministic = class == ClassCheck || class == ClassPublish || class == ClassOutput
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res := VisitResult{Task: ts.res, LeaseLost: r.leaseLost.Load(), End: r.ends.pending, Unused: r.ends.unused(),
		StoreTransient: ts.res.Class == retry.Store && r.storeSeen && !r.storeHard}
	res.Deterministic = deterministic || r.classes.Deterministic(ts.res.Class) || ts.res.Class == ClassInput || ts.state == TaskUnknown ||
		ts.final
	// The worker writes these to the store: masked as everything else.
	res.Task.Error, res.Task.Reason, res.Task.Ending = r.red.String(res.Task.Error), r.red.String(res.Task.Reason), r.red.String(res.Task.Ending)
	return res, nil
}
