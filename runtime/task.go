package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/artifacts"
	"github.com/pipec/pipec/runtime/exec"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/retry"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
)

// interrupted is why a task the run reached but never started was not run.
const interrupted = "the run was interrupted"

// errorTailLines and errorTailBytes bound the output kept in the store.
const (
	errorTailLines = 20
	errorTailBytes = 4000
)

// boundInput is one input resolved to an accepted version's directory.
type boundInput struct {
	vars []string // environment variable names
	dir  string   // "" when the interval does not exist (before the schedule's start)
	// name, label, location and digest say which version dir is, for
	// changedInputs.
	name, label, location, digest string
	// read is the version of another interval dir is, or nothing for an
	// interval before the schedule's start (nil for an input of the run's
	// own interval, whose versions tokens order): recorded with the
	// attempt's end (store.Attempt.Reads) for reusable's judgement.
	read *store.Read
}

// readsOf is the reads of inputs to record with an attempt's end.
func readsOf(inputs []boundInput) []store.Read {
	var reads []store.Read
	for _, in := range inputs {
		if in.read != nil {
			reads = append(reads, *in.read)
		}
	}
	return reads
}

// reuseTask completes a task from a previous run of the interval: its
// accepted outputs are published again, which is idempotent when they are
// already visible and completes a publish whose response was lost.
func (r *runner) reuseTask(ctx context.Context, ts *taskState, why string) {
	r.mu.Lock()
	ts.state, ts.res.State, ts.res.Reason = TaskReused, TaskReused, why
	r.mu.Unlock()
	r.record(ctx, EventTaskReused, ts.t.Name, 0, map[string]any{"reason": why})
	r.releaseClaim(ctx)
	for _, out := range ts.t.Outputs {
		v, err := r.st.AcceptedVersion(ctx, r.plan.Pipeline, out, r.iv.Key)
		if err != nil {
			r.skipChecksAndPublishes(out, err.Error())
			continue
		}
		for _, c := range r.checksOf[out] {
			r.setCheck(c.Name, CheckResult{Name: c.Name, Artifact: out, State: CheckPassed, Version: v.Label(),
				Reason: "accepted in " + v.Run})
		}
		r.publishAll(ctx, v, true)
	}
}

// resolveInputs finds the accepted version of every input for its interval.
// A missing one is the reason the task is not started.
func (r *runner) resolveInputs(ctx context.Context, t *compiler.PlanTask) ([]boundInput, string, error) {
	plain := map[string]bool{}
	for _, in := range t.Inputs {
		if in.Offset == 0 {
			plain[in.Artifact] = true
		}
	}
	var out []boundInput
	for _, in := range t.Inputs {
		b := boundInput{vars: inputVars(in, plain[in.Artifact])}
		iv, exists := r.iv.Offset(in.Offset)
		if !exists {
			// The interval is before the schedule's start: there is nothing
			// to read, and the task is told so by an unset variable. Read as
			// nothing, so that a start moved back later, and that interval
			// built, makes this result out of date.
			b.read = &store.Read{Artifact: in.Artifact, Interval: iv.Key}
			out = append(out, b)
			continue
		}
		// An output of this run's interval that this run made and did not
		// accept is the end of its readers here, even where an earlier run
		// left an accepted version: that one is not what their producer
		// made now (its definition or its data moved), and reading it
		// would mix the two runs' results.
		r.mu.Lock()
		why, rejected := r.rejected[in.Artifact]
		r.mu.Unlock()
		if rejected && in.Offset == 0 {
			return nil, fmt.Sprintf("input %s was not accepted in this run: %s", inputName(in), why), nil
		}
		v, err := r.st.AcceptedVersion(ctx, r.plan.Pipeline, in.Artifact, iv.Key)
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Sprintf("input %s has no accepted version for interval %s", inputName(in), iv.Key), nil
		}
		if err != nil {
			return nil, "", err
		}
		// From the artifact store, never from the disk of the worker that
		// produced it (it may be another machine, or gone).
		if b.dir, err = artifacts.Files(ctx, r.arts, v.Location); err != nil {
			return nil, "", &inputError{fmt.Errorf("input %s (%s): %w", inputName(in), v.Label(), err)}
		}
		b.name, b.label, b.location, b.digest = inputName(in), v.Label(), v.Location, v.Digest
		if in.Offset != 0 {
			b.read = &store.Read{Artifact: in.Artifact, Interval: iv.Key, Version: v.ID, Digest: v.Digest}
		}
		out = append(out, b)
	}
	return out, "", nil
}

// classStart is the class of an attempt whose process could not be
// started (its command not found, not executable).
const classStart = "start"

// ClassArtifacts is the class of a task failed because an accepted input is
// not in the artifact store as this machine sees it.
const ClassArtifacts = "artifacts"

// inputError is an accepted input the artifact store cannot give: a broken
// mount, a store folder this worker does not have, a version removed by hand.
type inputError struct{ err error }

func (e *inputError) Error() string { return e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

// inputVars names the variables of an input. An input of this run's interval
// is PIPEC_INPUT_<artifact>; one at an offset is PIPEC_INPUT_<artifact>_PREV
// (-1), _PREV<n> (-n) or _NEXT<n>, and also PIPEC_INPUT_<artifact> when the
// task does not read the artifact of its own interval.
func inputVars(in compiler.PlanInput, plainTaken bool) []string {
	base := "PIPEC_INPUT_" + in.Artifact
	if in.Offset == 0 {
		return []string{base}
	}
	var suffix string
	switch {
	case in.Offset == -1:
		suffix = "_PREV"
	case in.Offset < 0:
		suffix = "_PREV" + strconv.Itoa(-in.Offset)
	default:
		suffix = "_NEXT" + strconv.Itoa(in.Offset)
	}
	if plainTaken {
		return []string{base + suffix}
	}
	return []string{base, base + suffix}
}

func inputName(in compiler.PlanInput) string {
	if in.Offset == 0 {
		return in.Artifact
	}
	return fmt.Sprintf("%s@%+d", in.Artifact, in.Offset)
}

// runTask runs a task's attempts until one succeeds, a failure is final, or
// the run is cancelled.
func (r *runner) runTask(ctx context.Context, ts *taskState) {
	t := ts.t
	inputs, why, err := r.resolveInputs(ctx, t)
	if ie := (*inputError)(nil); errors.As(err, &ie) {
		// Another worker, one that mounts the store, may read it: not a
		// deterministic failure, so a worker's task fails over.
		r.mu.Lock()
		if r.artsErr == "" {
			r.artsErr = "task " + t.Name + ": " + ie.Error()
		}
		r.mu.Unlock()
		r.taskFailed(ctx, ts, ClassArtifacts, 0, ie.Error(), "an input could not be read from the artifact store "+r.arts.String())
		return
	}
	if err != nil && ctx.Err() != nil {
		r.notRun(ctx, ts, cancelReason(ctx)) // the run stopped: not the state's failure
		return
	}
	if err != nil {
		r.noteStore(err)
		r.taskFailed(ctx, ts, retry.Store, 0, err.Error(), "the state database could not be read")
		return
	}
	if why != "" {
		r.notRun(ctx, ts, why)
		return
	}
	r.runAttempts(ctx, ts, inputs)
}

// runAttempts is runTask once the inputs are resolved.
func (r *runner) runAttempts(ctx context.Context, ts *taskState, inputs []boundInput) {
	t := ts.t
	if ctx.Err() != nil {
		r.dropHanded(ctx, ts)
		r.notRun(ctx, ts, cancelReason(ctx))
		return
	}
	pol := policyOf(t.Retry)
	var first time.Time
	for {
		if first.IsZero() {
			first = time.Now()
		}
		out := r.attempt(ctx, ts, inputs)
		if out.interrupted {
			r.notRun(ctx, ts, interrupted)
			return
		}
		r.mu.Lock()
		ts.res.Attempts = out.number
		r.mu.Unlock()
		switch {
		case errors.Is(out.startErr, errNotHeld):
			r.taskFailed(ctx, ts, out.verdict.Class, 0, out.startErr.Error(), "not run here: another visit has the task")
			return
		case out.startErr != nil:
			r.mu.Lock()
			ts.res.Ending = "could not start: " + out.startErr.Error()
			r.mu.Unlock()
			why := "not retried: it would fail to start again"
			if out.verdict.Class == retry.Store {
				r.noteStore(out.startErr)
				why = retry.StoreNotRetried
			}
			r.taskFailed(ctx, ts, out.verdict.Class, 0, out.startErr.Error(), why)
			return
		case out.relaunch:
			r.record(ctx, EventAttemptLease, t.Name, out.number, map[string]any{"reason": out.reason})
			continue
		case out.succeeded:
			r.mu.Lock()
			ts.state, ts.res.State = TaskSucceeded, TaskSucceeded
			ts.res.Class, ts.res.Error, ts.res.ExitCode = "", "", 0
			r.mu.Unlock()
			// Not written to the store: the attempt's own state says it.
			r.emitStore(EventTaskSucceeded, t.Name, out.number, nil)
			return
		}
		if out.signaled && ctx.Err() == nil {
			r.killedByOther(ctx)
		}
		if out.unknown != "" {
			r.blockTask(ctx, ts, out.unknown)
			return
		}
		if ctx.Err() != nil {
			r.taskFailed(ctx, ts, out.verdict.Class, out.exitCode, out.tail, cancelReason(ctx))
			return
		}
		if r.leaseLost.Load() {
			r.taskFailed(ctx, ts, retry.LeaseExpired, out.exitCode, out.tail, "its lease expired: another worker takes the task over")
			return
		}
		d := r.decide(ctx, retry.Input{Policy: pol, Idempotent: t.Idempotent, Verdict: out.verdict, Attempt: out.number - r.visitBase,
			Elapsed: time.Since(first), Rand: r.rand, Task: t.Name})
		if !d.Retry {
			r.mu.Lock()
			ts.res.Ending, ts.final = out.ending, d.Spent
			r.mu.Unlock()
			class := out.verdict.Class
			switch {
			case d.Err != nil:
				class = retry.Store // the state failed, not the task
			case class == ClassInput:
				d.Reason = out.verdict.Reason // what it changed, where a worker's status shows the reason alone
			}
			r.taskFailed(ctx, ts, class, out.exitCode, out.tail, d.Reason)
			return
		}
		r.flushEnd(ctx) // the next attempt starts: this one's end is history
		r.record(ctx, EventAttemptRetry, t.Name, out.number, map[string]any{"class": out.verdict.Class,
			"delay_ms": d.Delay.Milliseconds(), "reason": d.Reason, "next_attempt": out.number + 1})
		select {
		case <-time.After(d.Delay):
		case <-ctx.Done():
			r.taskFailed(ctx, ts, out.verdict.Class, out.exitCode, out.tail, interrupted+" while waiting to retry")
			return
		}
	}
}

func (r *runner) taskFailed(ctx context.Context, ts *taskState, class string, exitCode int, tail, reason string) {
	r.mu.Lock()
	ts.state, ts.res.State = TaskFailed, TaskFailed
	ts.res.Class, ts.res.ExitCode, ts.res.Error, ts.res.Reason = class, exitCode, tail, reason
	r.mu.Unlock()
	r.record(ctx, EventTaskFailed, ts.t.Name, ts.res.Attempts, map[string]any{"class": class, "exit_code": exitCode,
		"error": tail, "reason": reason})
	for _, out := range ts.t.Outputs {
		r.skipChecksAndPublishes(out, fmt.Sprintf("task %s failed", ts.t.Name))
	}
}

// attemptOutcome is how one attempt went, from the task's point of view.
type attemptOutcome struct {
	number    int
	succeeded bool
	// relaunch: the attempt's lease expired and a new attempt may start; the
	// old process is left running, watched as a zombie.
	relaunch bool
	reason   string
	verdict  retry.Verdict
	// exitCode is the process's own exit status; 0 when it did not exit on
	// its own (a signal, a timeout): ending says what happened then.
	exitCode int
	ending   string
	// signaled: a signal pipec did not send ended the process.
	signaled bool
	// unknown, when set, says why the attempt's effect is unknown
	// (unseenEnd): the task is not retried and ends unknown.
	unknown string
	// interrupted: the run was cancelled before the attempt's process
	// started.
	interrupted bool
	tail        string
	startErr    error
}

// launched is a started attempt: its store record, process and staging.
type launched struct {
	a       store.Attempt
	proc    *exec.Process
	staging map[string]string // artifact -> staging dir
	inputs  []boundInput
	log     string
	// marked is closed once the store recorded the process's pid (markErr
	// says how that went). It runs beside the process, since nothing but
	// FinishAttempt depends on it.
	marked  chan struct{}
	markErr error
	// ran is set, before marked is closed, when the process ended before its
	// pid was recorded: FinishAttempt records it (store.Outcome.Ran).
	ran *store.Running
	// recorded is the attempt as this runner's writes left it, set before
	// marked is closed: a, or as MarkRunningAs returned it
	// (store.Outcome.Was).
	recorded store.Attempt
}

// attempt starts one attempt and waits for it to end or to lose its lease.
//
// Slots (the pool's and the global parallelism) bound running processes,
// not bookkeeping: the attempt takes its token queued, before it waits for a
// slot, and records its end after giving the slot back, so the store's group
// commit can batch the writes of many tasks into one sync.
func (r *runner) attempt(ctx context.Context, ts *taskState, inputs []boundInput) attemptOutcome {
	t := ts.t
	lease, every := r.leaseOf(t)
	a, err := r.nextAttempt(ctx, ts)
	if err != nil {
		return attemptOutcome{startErr: err, verdict: retry.Verdict{Class: retry.Store}}
	}
	r.emitStore(store.EventAttemptStarted, t.Name, a.Number, map[string]any{"token": a.Token})
	failStart := func(err error) attemptOutcome {
		if _, serr := os.Stat(r.o.BaseDir); errors.Is(serr, fs.ErrNotExist) {
			// A worker's machine without the folder pipec submit recorded
			// (a share not mounted there): say so, not "./x.sh: no such
			// file".
			err = fmt.Errorf("the spec's folder %s is not on this machine (is its share mounted here?): %w", r.o.BaseDir, err)
		}
		o := store.Outcome{State: store.AttemptFailed, Class: classStart, ExitCode: -1, ErrorTail: err.Error()}
		_ = r.endAttempt(r.records, a.AttemptRef, o)
		r.emitStore(store.EventAttemptFinished, t.Name, a.Number, map[string]any{"state": "failed", "class": classStart, "error": err.Error(),
			"why": "could not start: " + err.Error()})
		return attemptOutcome{number: a.Number, startErr: err, verdict: retry.Verdict{Class: classStart, Deterministic: true}}
	}
	l, spec, err := r.prepare(t, a, inputs, every)
	if err != nil {
		return failStart(err)
	}
	if !r.acquire(ctx, t) {
		// Interrupted while waiting for a slot: the attempt never started
		// (its token was taken early, see above), so the task was not run.
		_ = r.endAttempt(r.records, a.AttemptRef, store.Outcome{State: store.AttemptFailed,
			Class: queue.ClassNotStarted, ExitCode: -1, ErrorTail: "never started: " + interrupted})
		return attemptOutcome{number: a.Number, interrupted: true}
	}
	held := true
	defer func() {
		if held {
			r.release(t)
		}
	}()
	if !t.Idempotent {
		// Never beside the visit that took the task over: this attempt is
		// in the store, so a yes means that visit, if any, will find it.
		if err := r.confirmHeld(ctx); err != nil {
			_ = r.endAttempt(r.records, a.AttemptRef, store.Outcome{State: store.AttemptFailed,
				Class: queue.ClassNotStarted, ExitCode: -1, ErrorTail: "never started: " + err.Error()})
			return attemptOutcome{number: a.Number, startErr: err, verdict: retry.Verdict{Class: retry.LeaseExpired}}
		}
		// Its effect may happen the moment the process starts: say so on
		// stable storage first, so a rerun knows it may have run.
		if _, err := r.st.MarkRunningAs(r.records, a.AttemptRef, store.Running{
			Process: store.Process{Host: r.self.Host, Boot: r.self.Boot}, Lease: lease, Durable: true}); err != nil {
			if !r.visiting() && l.a.Run == r.runID && errors.Is(err, store.ErrNotFound) {
				// A crash of the state's server took back the attempt's
				// start (an asynchronous commit) before this record of
				// its launch: nothing ran, so the task starts again under
				// a new attempt, as an idempotent one does after a lost
				// record (lostAttempt); no retry is spent. A visit hands
				// its task back instead.
				return relaunchOf(l, "the state lost its record of the attempt's start ("+err.Error()+"); nothing ran")
			}
			// Nothing started: the state failed, not the task (a restart,
			// a network cut), which no class of the task's may say.
			_ = r.endAttempt(r.records, a.AttemptRef, store.Outcome{State: store.AttemptFailed,
				Class: queue.ClassNotStarted, ExitCode: -1, ErrorTail: "never started: " + err.Error()})
			return attemptOutcome{number: a.Number, startErr: err, verdict: retry.Verdict{Class: retry.Store}}
		}
	}
	defer r.readInputs(t.Name, inputs)() // who else may have changed an input it finds changed
	if err := r.startWhenResources(ctx, t, l, spec, lease); err != nil {
		return failStart(err)
	}
	lost := r.leases.watch(a.AttemptRef)
	defer r.leases.unwatch(a.AttemptRef)
	hb := newRenewer(r, a, t.Heartbeat != nil, lease, every)
	tick := time.NewTicker(hb.period)
	defer tick.Stop()
	marked := l.marked
	for {
		select {
		case <-marked:
			marked = nil
			if l.markErr != nil {
				// The store refused the attempt: it cannot be accounted
				// for, so it must not go on.
				l.proc.Stop()
			}
		case <-l.proc.Done():
			r.release(t)
			held = false
			return r.finishAttempt(ctx, ts, l)
		case <-tick.C:
			if marked == nil { // the lease starts once the pid is recorded
				hb.tick(ctx)
			}
		case <-lost:
			if t.Heartbeat != nil {
				markBeatLost(r.heartbeatPath(a.AttemptRef))
			}
			if r.visiting() {
				// A worker's visit: the task is another worker's now.
				r.leaseLost.Store(true)
				r.emitStore(store.EventAttemptUnknown, t.Name, a.Number, map[string]any{"token": a.Token,
					"relaunch": false, "reason": "its lease expired: this worker stops it, another takes the task over"})
				l.proc.Stop()
				lost = nil
				continue
			}
			d := r.decide(ctx, retry.Input{Policy: policyOf(t.Retry), Idempotent: t.Idempotent,
				Verdict: retry.Verdict{Class: retry.LeaseExpired}, Attempt: a.Number, LeaseExpired: true,
				Rand: r.rand, Task: t.Name})
			r.emitStore(store.EventAttemptUnknown, t.Name, a.Number, map[string]any{"token": a.Token,
				"relaunch": d.Retry, "reason": d.Reason})
			if d.Retry {
				// The unknown process no longer counts against the slots:
				// it may never come back.
				r.release(t)
				held = false
				r.adoptZombie(ts, l)
				return attemptOutcome{number: a.Number, relaunch: true, reason: d.Reason}
			}
			// Not relaunched: the unknown attempt is still the task's only
			// hope; keep waiting for it (its timeout still applies).
			lost = nil
		}
	}
}

// leaseOf is a task's lease, and its heartbeat period (0 without one).
func (r *runner) leaseOf(t *compiler.PlanTask) (lease, every time.Duration) {
	lease = r.o.DefaultLease
	if hb := t.Heartbeat; hb != nil {
		if d, err := time.ParseDuration(hb.Lease); err == nil && d > 0 {
			lease = d
		}
		if d, err := time.ParseDuration(hb.Every); err == nil && d > 0 {
			every = d
		}
	}
	return lease, every
}

// prepare makes an attempt's staging directories, heartbeat file and
// environment, before it waits for a slot.
func (r *runner) prepare(t *compiler.PlanTask, a store.Attempt, inputs []boundInput, every time.Duration) (*launched, exec.Spec, error) {
	l := &launched{a: a, staging: map[string]string{}, inputs: inputs}
	for _, in := range inputs {
		if in.dir != "" {
			_, _ = r.seeInput(in.dir) // what inputsChanged compares with, seen before any reader starts
		}
	}
	env := make(exec.Env, 16) // over r.baseEnv
	for k, v := range t.Env {
		env[k] = v
	}
	for _, name := range t.SecretEnv {
		v, ok := r.parentEnv[name]
		if !ok {
			return nil, exec.Spec{}, fmt.Errorf("secret_env %s is not set in pipec's environment", name)
		}
		env[name] = v
	}
	for _, kv := range markerOf(r.stateID, r.runID, a.Token) { // PIPEC_STATE_ID, PIPEC_RUN_ID, PIPEC_TOKEN
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if r.visiting() {
		env["PIPEC_WORKER"] = r.o.Worker // a visit: the worker's name
	}
	env["PIPEC_TASK"] = t.Name
	env["PIPEC_ATTEMPT"] = strconv.Itoa(a.Number)
	env["PIPEC_INTERVAL_START"] = r.iv.Start.Format(time.RFC3339)
	env["PIPEC_INTERVAL_END"] = r.iv.End.Format(time.RFC3339)
	env["PIPEC_INTERVAL"] = r.iv.Key
	env["PIPEC_CODE_VERSION"] = r.plan.CodeVersion
	env["PIPEC_STATE"] = r.o.StatePath
	if r.o.ServerState != "" {
		env["PIPEC_STATE"] = r.o.ServerState
	}
	for _, out := range t.Outputs {
		dir, err := sink.NewStaging(filepath.Join(r.stateDir, "staging"), r.runID, t.Name, a.Number, out)
		if err != nil {
			return nil, exec.Spec{}, err
		}
		l.staging[out] = dir
		env["PIPEC_OUTPUT_"+out] = dir
	}
	for _, in := range inputs {
		if in.dir == "" {
			continue
		}
		for _, v := range in.vars {
			env[v] = in.dir
		}
	}
	if t.Heartbeat != nil {
		hb := r.heartbeatPath(a.AttemptRef)
		if err := os.MkdirAll(filepath.Dir(hb), 0o700); err != nil {
			return nil, exec.Spec{}, err
		}
		if err := os.WriteFile(hb, nil, 0o600); err != nil {
			return nil, exec.Spec{}, err
		}
		env["PIPEC_HEARTBEAT"] = hb
		env["PIPEC_HEARTBEAT_EVERY"] = strconv.FormatFloat(every.Seconds(), 'f', -1, 64)
	}
	var timeout time.Duration
	if t.Timeout != "" {
		timeout, _ = time.ParseDuration(t.Timeout)
	}
	l.log = r.logPath(a.AttemptRef)
	return l, exec.Spec{Argv: t.Command, Dir: r.o.BaseDir, Env: env.Over(r.baseEnv), Timeout: timeout,
		KillGrace: r.o.KillGrace, LogPath: l.log, LogLimit: r.o.LogLimit, Redact: r.red.Secrets(), Paths: r.paths,
		IdentifyLater: markedLate(t)}, nil
}

// markDelay is how long a started process runs before its pid is recorded
// on its own: one that ends sooner (most bookkeeping-bound tasks: a 1,000-task
// DAG of `true` is all of them) has it recorded by the write that records its
// end. Until then the attempt is queued with no pid, as in the moment after
// any start; a rerun after a crash finds its processes by their marker.
// Recorded at once are a non-idempotent task (a rerun must be able to verify
// its orphan by pid and start time, not only by marker) and a task with a
// heartbeat (its heartbeat command renews a lease only a running attempt has).
const markDelay = 50 * time.Millisecond

// markedLate says whether t's attempts wait markDelay before their start is
// recorded (see markDelay). Their processes are identified late too, only
// when that is recorded: most end sooner, and need no identity then.
func markedLate(t *compiler.PlanTask) bool { return t.Idempotent && t.Heartbeat == nil }

// endsWithin waits until p ended (true) or d passed (false).
func endsWithin(p *exec.Process, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.Done():
		return true
	case <-t.C:
		return false
	}
}

// start launches a prepared attempt and records its pid beside it.
func (r *runner) start(ctx context.Context, t *compiler.PlanTask, l *launched, spec exec.Spec, lease time.Duration) error {
	a := l.a
	p, err := exec.Start(ctx, spec)
	if err != nil {
		return err
	}
	l.proc = p
	l.marked = make(chan struct{})
	r.gos.Go(func() {
		ended := markedLate(t) && endsWithin(p, markDelay)
		id := p.Identity()
		run := store.Running{Process: store.Process{Host: r.self.Host, Boot: r.self.Boot, PID: id.PID, PGID: id.PGID,
			Start: id.Start}, Lease: lease}
		l.recorded = a
		if !ended {
			var rec store.Attempt
			if rec, ended, l.markErr = r.markStarted(p, a, run, lease); !ended {
				l.recorded = rec
			}
		}
		if ended {
			// Ended already: its start is recorded with its end, one store
			// write instead of two (store.Outcome.Ran says why that is safe).
			l.ran, l.markErr = &run, nil
		}
		if l.markErr == nil {
			r.emitStore(store.EventAttemptRunning, t.Name, a.Number, map[string]any{"pid": p.PID(), "token": a.Token, "log": l.log})
		}
		close(l.marked) // after the event: the attempt's end is reported after its start
	})
	return nil
}

// startWait bounds how long a start short of resources is tried again.
const startWait = 30 * time.Second

// startWhenResources is start, tried again while it fails for want of
// file descriptors, processes or memory (exec.ResourcesShort): other
// processes, this run's among them, give them back as they end, and the
// task never started, so trying again is safe for any task. Pausing 20 ms,
// doubling up to a second, for up to startWait; then the error says what
// ran short for how long.
func (r *runner) startWhenResources(ctx context.Context, t *compiler.PlanTask, l *launched, spec exec.Spec, lease time.Duration) error {
	pause, waited := 20*time.Millisecond, time.Duration(0)
	for {
		err := r.start(ctx, t, l, spec, lease)
		if err == nil || !exec.ResourcesShort(err) {
			return err
		}
		if waited >= startWait || ctx.Err() != nil {
			return fmt.Errorf("%w (still, after trying again for %s: the machine or this process ran out of it; "+
				"lower --parallel or --slots, or raise the limit: ulimit -n for files, ulimit -u for processes)", err, waited.Round(time.Second))
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
			waited += pause
			pause = min(2*pause, time.Second)
		}
	}
}

// markStarted records a started process's identity (MarkRunningAs), or
// says that it ended first. A state that could not be reached (a restart,
// a crash of the server, a network cut) does not stop the process at
// once: its start is written again while it runs, for up to a third of
// its lease, within which nobody takes the attempt for lost. Stopping it
// made a blip of the state a task run again, or, for one that is not
// idempotent (its start recorded before its process started), an unknown
// for a person to settle. A refused write stops it as before.
func (r *runner) markStarted(p *exec.Process, a store.Attempt, run store.Running, lease time.Duration) (store.Attempt, bool, error) {
	var retry *time.Timer
	for first := time.Now(); ; {
		rec, err := r.st.MarkRunningAs(r.records, a.AttemptRef, run)
		if err == nil || !errors.Is(err, store.ErrUnreachable) || time.Since(first) >= lease/3 {
			return rec, false, err
		}
		if retry == nil {
			retry = time.NewTimer(markAgain)
			defer retry.Stop()
		} else {
			retry.Reset(markAgain)
		}
		select {
		case <-p.Done():
			return a, true, nil
		case <-r.records.Done():
			return rec, false, err
		case <-retry.C:
		}
	}
}

// markAgain is how often markStarted writes a start again.
const markAgain = 100 * time.Millisecond

// finishAttempt records how a (current) attempt ended and, on success,
// audits and publishes its outputs.
func (r *runner) finishAttempt(ctx context.Context, ts *taskState, l *launched) attemptOutcome {
	res := l.proc.Wait()
	<-l.marked
	if r.o.AfterExit != nil {
		r.o.AfterExit(ctx, ts.t.Name)
	}
	// stopped is what stopped it, in the words of an unknown's reason.
	ending := res.Describe()
	stopped := ending
	if cause := stopCause(ctx); res.Stopped && cause != "" {
		ending, stopped = "was stopped: "+cause, cause
	}
	out := attemptOutcome{number: l.a.Number, ending: ending, signaled: res.Signal != 0 && !res.TimedOut && !res.Stopped}
	if res.Signal == 0 && !res.TimedOut && !res.Stopped {
		out.exitCode = res.ExitCode
	}
	fctx := r.records
	if why := r.lostAttempt(ctx, ts.t, l, l.markErr); why != "" {
		return relaunchOf(l, why)
	}
	if l.markErr != nil {
		r.noteStore(l.markErr)
		out.verdict = retry.Verdict{Class: retry.Store}
		out.tail = l.markErr.Error()
		return out
	}
	changed, short := r.changedInputs(ctx, ts.t, l.inputs)
	if res.Success() && changed == "" && r.ends != nil {
		// A visit: the attempt's end is recorded with the visit's, after
		// the audit (see visitEnds).
		r.produceThenEnd(ctx, ts, l)
		out.succeeded = true
		return out
	}
	if res.Success() && changed != "" && !ts.t.Idempotent {
		// Its effect happened: the attempt succeeded (a rerun must not do
		// it again), the task did not, and its outputs are not read.
		_ = r.endAttempt(fctx, l.a.AttemptRef, store.Outcome{State: store.AttemptSucceeded, Ran: l.ran, Was: &l.recorded,
			Reads: readsOf(l.inputs)})
		r.emitStore(store.EventAttemptFinished, ts.t.Name, l.a.Number, map[string]any{"state": "succeeded", "exit_code": 0})
		out.verdict, out.tail = inputVerdict(short), changed
		return out
	}
	if res.Success() && changed == "" {
		if err := r.finishHandingOff(ctx, ts, l.a.AttemptRef, store.Outcome{State: store.AttemptSucceeded, Ran: l.ran, Was: &l.recorded,
			Reads: readsOf(l.inputs)}); err != nil {
			if why := r.lostAttempt(ctx, ts.t, l, err); why != "" {
				return relaunchOf(l, why)
			}
			r.noteStore(err)
			out.verdict = retry.Verdict{Class: retry.Store}
			out.tail = err.Error()
			return out
		}
		r.emitStore(store.EventAttemptFinished, ts.t.Name, l.a.Number, map[string]any{"state": "succeeded", "exit_code": 0})
		if why := r.produce(ctx, ts.t, l, false); why != "" {
			return relaunchOf(l, why)
		}
		out.succeeded = true
		return out
	}
	out.verdict = r.classes.Classify(retry.Ending{ExitCode: res.ExitCode, TimedOut: res.TimedOut,
		Signaled: res.Signal != 0 && !res.TimedOut && !res.Stopped, Output: res.Tail})
	if res.Stopped {
		out.verdict = retry.Verdict{Class: retry.Killed, Reason: "stopped by the runtime"}
	}
	out.tail = exec.LastLines(res.Tail, errorTailLines, errorTailBytes)
	if out.tail == "" {
		out.tail = ending
	}
	why := ending
	if changed != "" {
		out.verdict, out.tail, why = inputVerdict(short), changed, changed
	}
	o := store.Outcome{State: store.AttemptFailed, Class: out.verdict.Class, ExitCode: res.ExitCode, ErrorTail: out.tail, Ran: l.ran,
		Was: &l.recorded}
	if unseenEnd(ts.t.Idempotent, res) {
		o.State = store.AttemptUnknown
		out.unknown = fmt.Sprintf("attempt %d of %s (token %d) may have taken effect: it was stopped while it ran (%s); "+
			"settle it with: pipec resolve %s %s --as succeeded|failed --reason TEXT",
			l.a.Number, l.a.Run, l.a.Token, stopped, l.a.Run, ts.t.Name)
	}
	_ = r.endAttempt(fctx, l.a.AttemptRef, o)
	r.emitStore(store.EventAttemptFinished, ts.t.Name, l.a.Number, map[string]any{"state": string(o.State), "class": out.verdict.Class,
		"exit_code": res.ExitCode, "error": out.tail, "why": why})
	return out
}

// stopCause says why the runtime stopped a process, from what ended ctx
// (a worker's shutdown, its run cancelled, its claim lost): "" when
// nothing says why (Ctrl-C).
func stopCause(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) && !errors.Is(c, context.DeadlineExceeded) {
		return c.Error()
	}
	return ""
}

// lostAttempt is why a local run relaunches attempt l of t, whose record
// the state no longer finds (err; a crash of its server took back its last
// commits, asynchronous ones on PostgreSQL), or "" when it does not: a
// task that may run again runs again under a new attempt and token, as
// after a lost lease, rather than failing the run. A task that is not
// idempotent has its start and end committed synchronously, so its record
// is never lost this way; a worker's visit hands its task back instead
// (VisitResult.StoreTransient); an attempt of an earlier run, adopted, is
// not this run's to relaunch.
func (r *runner) lostAttempt(ctx context.Context, t *compiler.PlanTask, l *launched, err error) string {
	if err == nil || r.visiting() || l.a.Run != r.runID || !errors.Is(err, store.ErrNotFound) {
		return ""
	}
	d := r.decide(ctx, retry.Input{Policy: policyOf(t.Retry), Idempotent: t.Idempotent,
		Verdict: retry.Verdict{Class: retry.LeaseExpired}, Attempt: l.a.Number, LeaseExpired: true,
		Rand: r.rand, Task: t.Name})
	if !d.Retry {
		return ""
	}
	return "the state lost its record (" + err.Error() + "): " + d.Reason
}

// decide is retry.Decide with the run's retry budget, counted in the state
// (store.TakeRetry) so that every process running the run's tasks spends
// one budget. A budget the state could not count retries nothing: the
// failure is the state's (storeFailed).
func (r *runner) decide(ctx context.Context, in retry.Input) retry.Decision {
	if r.budget != nil {
		in.Budget = budgetAccount{ctx: ctx, st: r.st, run: r.runID, budget: *r.budget}
	}
	d := retry.Decide(in)
	if d.Err != nil && ctx.Err() == nil {
		r.storeFailed(fmt.Sprintf("counting a retry of %s: %v", in.Task, d.Err), d.Err)
	}
	return d
}

// budgetAccount is a run's retry budget as the state counts it.
type budgetAccount struct {
	ctx    context.Context
	st     store.Store
	run    string
	budget retry.Budget
}

func (a budgetAccount) Take() (retry.Usage, error) {
	c, err := a.st.TakeRetry(a.ctx, a.run, a.budget.Allowed)
	if err != nil {
		return retry.Usage{}, err
	}
	return retry.Usage{Taken: c.Taken, Used: c.Used, Allowed: a.budget.Allowed(c.First)}, nil
}

// relaunchOf is the outcome of attempt l relaunched for why.
func relaunchOf(l *launched, why string) attemptOutcome {
	return attemptOutcome{number: l.a.Number, relaunch: true, reason: why}
}

// unseenEnd says whether an attempt's end leaves its effect unknown: a
// non-idempotent task's process that did not end on its own (pipec stopped
// it, on Ctrl-C, a lost lease, a worker's shutdown or its timeout, or a
// signal from someone else ended it) may have done its effect or not, and
// stays unknown until a person settles it with pipec resolve, whoever
// stopped it. An idempotent task's is simply failed: running it again is
// safe.
func unseenEnd(idempotent bool, res exec.Result) bool {
	return !idempotent && (res.Stopped || res.TimedOut || res.Signal != 0)
}

func (r *runner) logPath(ref store.AttemptRef) string {
	return filepath.Join(r.stateDir, "logs", filepath.FromSlash(ref.Run), ref.Task, strconv.Itoa(ref.Number)+".log")
}

func (r *runner) heartbeatPath(ref store.AttemptRef) string {
	return filepath.Join(r.stateDir, "heartbeats", filepath.FromSlash(ref.Run), ref.Task, strconv.Itoa(ref.Number))
}

// policyOf converts the plan's retry policy.
func policyOf(p *compiler.PlanRetry) *retry.Policy {
	if p == nil {
		return nil
	}
	parse := func(s string) time.Duration {
		d, _ := time.ParseDuration(s)
		return d
	}
	return &retry.Policy{Name: p.Policy, MaxAttempts: p.MaxAttempts, Initial: parse(p.Initial), Multiplier: p.Multiplier,
		MaxDelay: parse(p.MaxDelay), Jitter: strings.ToLower(p.Jitter), MaxElapsed: parse(p.MaxElapsed), On: p.On}
}
