package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/artifacts"
	"github.com/pipec/pipec/runtime/exec"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/retry"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
)

// Before a task runs: what its earlier attempts decide
//
// Whoever dispatches a task (a local run's scheduler, a worker's visit), the
// same questions are asked of its earlier attempts in the interval, here and
// only here:
//
//   - does a process of an unfinished attempt still run on this machine?
//     It is ended first (endOrphans): no task starts beside its own orphan;
//   - did a non-idempotent attempt start whose end nobody saw (running, or
//     unknown)? Then its effect may have happened: the task is not run
//     (blocked) until `pipec resolve` settles it (settlePrior);
//   - did a non-idempotent attempt succeed (or was it resolved so)? It is
//     not run again (adopted);
//   - are the task's results current (reusable)? An idempotent task whose
//     outputs have accepted versions of this code_version, made after the
//     newest success of every task it needs, is reused, not rerun.

// runOne runs one task as every dispatcher does: not at all while an
// earlier attempt's effect is unknown, adopted, reused, or run.
func (r *runner) runOne(ctx context.Context, ts *taskState) {
	if h := ts.handed; h != nil {
		// The end of the task it waited for started it, after the same
		// questions (startable).
		r.runAttempts(ctx, ts, h.inputs)
		return
	}
	name := ts.t.Name
	if why, ok := r.blocked[name]; ok {
		r.blockTask(ctx, ts, why)
		return
	}
	if a, ok := r.adopt[name]; ok {
		r.adoptTask(ctx, ts, a)
		return
	}
	if r.hasPrior {
		why, outdated, err := r.reusable(ctx, ts)
		if err != nil && ctx.Err() != nil {
			r.notRun(ctx, ts, cancelReason(ctx))
			return
		}
		if err != nil {
			r.noteStore(err)
			r.taskFailed(ctx, ts, retry.Store, 0, err.Error(), "the state database could not be read")
			return
		}
		if why != "" {
			r.reuseTask(ctx, ts, why)
			return
		}
		if outdated != "" {
			r.record(ctx, EventTaskOutdated, name, 0, map[string]any{"reason": outdated})
		}
	}
	r.runTask(ctx, ts)
}

// markerOf is the environment entries that every process of attempt
// (run, token) of the state stateID carries (exec.Marker), set in its
// environment by prepare from this very list. The run and the token alone
// repeat across states: every state's first run of an interval is r1 and
// draws the same first token, so two folders of one pipeline on a machine
// (a checkout and its copy, two CI jobs, staging beside production) would
// each find the other's processes its own, and a rerun of one would end
// the other's running tasks.
func markerOf(stateID, run string, token int64) exec.Marker {
	return exec.Marker{"PIPEC_STATE_ID=" + stateID, "PIPEC_RUN_ID=" + run, "PIPEC_TOKEN=" + strconv.FormatInt(token, 10)}
}

// endOrphans ends, on this machine, every live process of the unfinished
// attempts given (exec.EndOrphans) and waits until they are gone; an error
// means one could not be ended, and nothing may start.
func (r *runner) endOrphans(ctx context.Context, open []store.Attempt) error {
	if len(open) == 0 {
		return nil
	}
	targets := make([]exec.Target, len(open))
	for i, a := range open {
		p := a.Process()
		targets[i] = exec.Target{
			ID:     exec.Identity{Host: p.Host, Boot: p.Boot, PID: p.PID, PGID: p.PGID, Start: p.Start},
			Marker: markerOf(r.stateID, a.Run, a.Token),
		}
	}
	found, err := exec.EndOrphans(ctx, targets, r.o.KillGrace)
	for i, f := range found {
		if f.Found > 0 {
			a := open[i]
			r.record(ctx, EventOrphansEnded, a.Task, a.Number, map[string]any{"run_of_attempt": a.Run,
				"processes": f.Found, "killed": f.Killed, "token": a.Token})
		}
	}
	if err != nil {
		return fmt.Errorf("ending the processes an earlier attempt left behind: %w (nothing was started)", err)
	}
	return nil
}

// settlePrior decides what a non-idempotent task's earlier attempts (as,
// any order) allow: blocked (r.blocked) when one may have taken effect
// unseen, adopted (r.adopt) when the newest succeeded. An attempt never
// launched (neverLaunched) is ended failed, unstarted, and blocks nothing.
func (r *runner) settlePrior(ctx context.Context, ts *taskState, as []store.Attempt) error {
	if ts.t.Idempotent || len(as) == 0 {
		return nil
	}
	as = slices.Clone(as)
	slices.SortFunc(as, func(a, b store.Attempt) int { return cmp.Compare(a.Token, b.Token) })
	for i, a := range as {
		switch {
		case neverLaunched(a):
			err := r.st.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptFailed, Class: queue.ClassNotStarted,
				ExitCode: -1, ErrorTail: "never started: it was stopped before launching it"})
			if err != nil && !errors.Is(err, store.ErrConflict) {
				return err
			}
		case !a.State.Finished():
			if v, ok, err := r.recordedVersion(ctx, ts, a); err != nil {
				return err
			} else if ok {
				// Its end was not recorded (its worker died before the
				// visit's end, which records it), but a version is
				// recorded only for an attempt whose process succeeded:
				// the effect happened, once, and the attempt is that
				// success.
				o := store.Outcome{State: store.AttemptSucceeded, ErrorTail: fmt.Sprintf("its end was not recorded; "+
					"the version it recorded (%s) says its process succeeded", v.Label())}
				if err := r.st.FinishAttempt(ctx, a.AttemptRef, o); err == nil {
					as[i].State = store.AttemptSucceeded
					continue
				} else if !errors.Is(err, store.ErrConflict) {
					return err
				}
			}
			if _, ok := r.blocked[ts.t.Name]; !ok {
				// Its end was not recorded: its pipec stopped, or saw the end
				// and could not write it (a full disk); either way only a
				// person can say whether the effect happened.
				r.blocked[ts.t.Name] = fmt.Sprintf("attempt %d of %s (token %d) may have taken effect: its end was never "+
					"recorded (its pipec stopped while it ran, or could not write the state); settle it with: "+
					"pipec resolve %s %s --as succeeded|failed --reason TEXT",
					a.Number, a.Run, a.Token, a.Run, a.Task)
			}
		}
	}
	// The newest attempt that may have run decides: one that never ran (a
	// claim's attempt its visit did not use, as when it adopted this very
	// success, or one stopped before its launch) took no effect, and a
	// worker's third run of an interval charged again behind one.
	as = slices.DeleteFunc(as, neverRan)
	if len(as) == 0 {
		return nil
	}
	latest := as[len(as)-1]
	// A forced run adopts only its own (an earlier visit of it).
	if _, ok := r.blocked[ts.t.Name]; !ok && latest.State == store.AttemptSucceeded && (!r.o.Force || latest.Run == r.runID) {
		r.adopt[ts.t.Name] = latest
	}
	return nil
}

// recordedVersion is a version attempt a of ts recorded of one of its
// outputs in this interval, if any: produce records one only after the
// attempt's process succeeded.
func (r *runner) recordedVersion(ctx context.Context, ts *taskState, a store.Attempt) (store.Version, bool, error) {
	for _, out := range ts.t.Outputs {
		v, err := r.st.AttemptVersion(ctx, a.AttemptRef, out, r.iv.Key)
		if err == nil {
			return v, true, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return store.Version{}, false, err
		}
	}
	return store.Version{}, false, nil
}

// classAbandoned is the class settlePrior gave an attempt an earlier run
// queued and never launched, before it gave queue.ClassNotStarted (which
// also fences nothing): a state may hold such attempts.
const classAbandoned = "abandoned"

// neverLaunched reports a non-idempotent task's attempt that never
// launched its process: still queued, or made unknown while queued (its
// worker's claim expired before the visit launched it). Such a task
// records its launch (running, with its start time) durably before its
// process starts, so an attempt without a start time never ran.
func neverLaunched(a store.Attempt) bool {
	return a.State == store.AttemptQueued || a.State == store.AttemptUnknown && a.Started.IsZero()
}

// neverRan reports an attempt whose task never began: never launched, or
// ended as never launched (classAbandoned) or as a claim's attempt its
// visit did not use (queue.ClassNotStarted).
func neverRan(a store.Attempt) bool {
	return neverLaunched(a) ||
		a.State == store.AttemptFailed && (a.Class == classAbandoned || a.Class == queue.ClassNotStarted)
}

// reusable says why a task need not run again (from; "" when it must):
// its outputs have accepted versions of this interval made by this
// code_version (a task without outputs: an attempt succeeded) in a run
// that defined the task as this one does (edited), newer than the newest
// success of each task it needs, so nothing upstream changed since, and
// each version of another interval it read is still its interval's
// (readsMoved). Tokens of an interval only grow, so they order all of
// this but the reads. When an earlier run's results exist but are out of
// date, outdated says why (the run says it: task.outdated).
func (r *runner) reusable(ctx context.Context, ts *taskState) (from, outdated string, err error) {
	if r.o.Force || !ts.t.Idempotent {
		return "", "", nil
	}
	var made int64                // the oldest of the results reused
	var makers []store.AttemptRef // the attempts whose results are reused
	if len(ts.t.Outputs) == 0 {
		as, err := r.st.TaskAttempts(ctx, r.resource, ts.t.Name)
		if err != nil {
			return "", "", err
		}
		var maker store.AttemptRef
		for _, a := range as {
			if a.State == store.AttemptSucceeded && a.Run != r.runID {
				made, from, maker = a.Token, a.Run, a.AttemptRef
			}
		}
		if made == 0 {
			return "", "", nil
		}
		if why, err := r.edited(ctx, from, ts); why != "" || err != nil {
			return "", why, err
		}
		from = "succeeded in " + from
		makers = append(makers, maker)
	}
	for _, out := range ts.t.Outputs {
		v, err := r.st.AcceptedVersion(ctx, r.plan.Pipeline, out, r.iv.Key)
		if errors.Is(err, store.ErrNotFound) || (err == nil && v.Run == r.runID) {
			return "", "", nil
		}
		if err != nil {
			return "", "", err
		}
		if v.CodeVersion != r.plan.CodeVersion {
			return "", fmt.Sprintf("its output %s was made at code_version %s, the spec's is %s", out, orNone(v.CodeVersion),
				orNone(r.plan.CodeVersion)), nil
		}
		if r.missingFromStore(ctx, v) {
			// Made again, rather than its readers failing.
			return "", fmt.Sprintf("its output %s (%s) is not in the artifact store any more", out, v.Label()), nil
		}
		if why, err := r.edited(ctx, v.Run, ts); why != "" || err != nil {
			return "", why, err
		}
		if made == 0 || v.Token < made {
			made = v.Token
		}
		from = "accepted outputs from " + v.Run
		if ref := (store.AttemptRef{Run: v.Run, Task: v.Task, Number: v.Attempt}); !slices.Contains(makers, ref) {
			makers = append(makers, ref) // one attempt makes all its outputs: its reads are read once
		}
	}
	for _, need := range ts.t.Needs {
		as, err := r.st.TaskAttempts(ctx, r.resource, need)
		if err != nil {
			return "", "", err
		}
		since := ""
		for _, a := range as { // in token order: the newest last
			if a.State == store.AttemptSucceeded && a.Token > made {
				since = a.Run
			}
		}
		if since != "" {
			// Upstream ran again since: new data.
			return "", fmt.Sprintf("task %s, which it needs, ran again since (in %s)", need, since), nil
		}
	}
	// Tokens order one interval's results only: what a task read of
	// another interval is checked apart.
	if ts.t.ReadsOtherIntervals() {
		for _, ref := range makers {
			if moved, err := r.readsMoved(ctx, ref); moved != nil || err != nil {
				if err != nil {
					return "", "", err
				}
				return "", fmt.Sprintf("it read %s of %s, which was rebuilt since", moved.Artifact, moved.Interval), nil
			}
		}
	}
	return from, "", nil
}

// orNone is s, or "" quoted when empty (a code_version left unset).
func orNone(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// readsMoved returns the first version of another interval that the
// attempt ref read (store.Attempt.Reads) whose interval no longer accepts
// that content (store.FirstMoved); nil when none: a rebuild there that
// changed it (a forced run of the interval, its source corrected) leaves
// the result ref made out of date, although nothing of this interval
// moved. An attempt ended before reads were recorded read nothing so.
func (r *runner) readsMoved(ctx context.Context, ref store.AttemptRef) (*store.Read, error) {
	a, err := r.st.GetAttempt(ctx, ref)
	if err != nil {
		return nil, err
	}
	return store.FirstMoved(a.Reads, func(artifact, interval string) (string, error) {
		v, err := r.st.AcceptedVersion(ctx, r.plan.Pipeline, artifact, interval)
		if errors.Is(err, store.ErrNotFound) {
			return "", nil
		}
		return v.Digest, err
	})
}

// edited says how run defined the task otherwise than this run does
// (compiler.DefinitionEdit), as a task.outdated reason; "" when alike:
// results of an edited command, environment or inputs are not reused,
// although code_version did not move, nor outputs that a check new or
// edited since never audited. A run recorded before runs kept their
// tasks' digests counts as alike, as it did then.
func (r *runner) edited(ctx context.Context, run string, ts *taskState) (string, error) {
	digests, err := r.defined.of(ctx, r.st, run)
	if err != nil || digests == nil {
		return "", err
	}
	switch compiler.DefinitionEdit(digests[ts.t.Name], r.digests[ts.t.Name]) {
	case compiler.EditedTask:
		return "the spec defines it otherwise than " + run + " did", nil
	case compiler.EditedChecks:
		return "a check of its outputs is new or edited since " + run, nil
	}
	return "", nil
}

// runDefinitions holds the task digests of earlier runs, each read once
// for a plan's runs and visits (PlanSetup): a rerun that reuses a thousand
// tasks asks of one or two runs a thousand times (reading them each time
// made such a local rerun five times slower).
type runDefinitions struct {
	mu   sync.Mutex
	runs map[string]map[string]string
}

// of is run's store.Run.TaskDigests.
func (d *runDefinitions) of(ctx context.Context, st store.Store, run string) (map[string]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if digests, ok := d.runs[run]; ok {
		return digests, nil
	}
	r, err := st.GetRun(ctx, run)
	if err != nil {
		return nil, err
	}
	if d.runs == nil {
		d.runs = map[string]map[string]string{}
	}
	d.runs[run] = r.TaskDigests
	return r.TaskDigests, nil
}

// missingFromStore reports whether the artifact store surely no longer
// holds accepted version v (its copy was dropped as changed, removed by
// hand, or the store moved): a task that would be reused for it runs again,
// and makes it again. A store that cannot say (unreachable) or a location
// that is not a key counts as holding it: its readers then say what failed.
func (r *runner) missingFromStore(ctx context.Context, v store.Version) bool {
	k, err := artifacts.ParseKey(v.Location)
	if err != nil {
		return false
	}
	held, err := r.arts.Has(ctx, k)
	return err == nil && !held
}

// fenceRecorder is a sink that keeps a fence record per interval.
type fenceRecorder interface {
	Record(ctx context.Context, interval string) (*sink.Record, error)
}

// raiseAboveSinks makes this interval's next tokens exceed every token a
// sink bound to this state accepted for it that the state itself does not
// know of: a state restored from a backup has forgotten the tokens it
// granted after the backup, which its sinks have seen, and would grant them
// again, every publish fenced until its epoch climbed past the lost
// history. A sink's record holds the tokens of accepted versions only, so
// on a state that lost nothing this finds nothing and writes nothing.
func (r *runner) raiseAboveSinks(ctx context.Context) error {
	stateID, err := r.st.StateID(ctx)
	if err != nil {
		return err
	}
	var floor int64
	from := ""
	for _, name := range slices.Sorted(mapKeys(r.sinks)) {
		fr, ok := r.sinks[name].(fenceRecorder)
		if !ok {
			continue
		}
		rec, err := fr.Record(ctx, r.iv.Key)
		if err != nil || rec == nil || rec.State != stateID || rec.Pipeline != r.plan.Pipeline || rec.Token <= floor {
			continue
		}
		v, err := r.st.AcceptedVersion(ctx, r.plan.Pipeline, rec.Artifact, r.iv.Key)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err != nil || v.Token < rec.Token {
			floor, from = rec.Token, name
		}
	}
	if floor == 0 {
		return nil
	}
	return r.st.RaiseTokens(ctx, []string{r.resource}, floor, fmt.Sprintf(
		"sink %s accepted token %d for %s, which this state does not know of (was it restored from a backup?)", from, floor, r.iv.Key))
}
