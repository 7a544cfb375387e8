package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/artifacts"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
)

// Orphans
//
// A kill -9 of pipec leaves its tasks running: they are its orphans. A
// rerun never starts a task while an earlier attempt of it may still run.
// Before it abandons the earlier runs it ends, on this machine, every live
// process of their unfinished attempts (exec.EndOrphans: the recorded pid
// verified by its start time and the boot id, the members of its group, and
// processes carrying the attempt's PIPEC_RUN_ID and PIPEC_TOKEN), and waits
// until they are gone. If one cannot be ended, the run starts nothing.
//
// No supervisor outlives pipec: the exit status of a task that ended after
// its pipec died is lost. So an attempt of a non-idempotent task (effects,
// idempotent = false) that was launched and whose end nobody saw stays
// unknown: its effect may or may not have happened. The rerun does not run
// that task (nor what needs it) and fails, saying how to settle it with
// `pipec resolve RUN TASK --as succeeded|failed --reason TEXT`. Resolved as
// failed, the task runs again; as succeeded, it is not run again and its
// staged outputs, if any, go through the audit and publish as any attempt's.
// An idempotent task is simply relaunched: its new, higher token fences
// whatever the old attempt left.
//
// Launched means: a non-idempotent attempt records its launch intent in the
// store durably before its process starts, so an attempt still queued in the
// store never ran, even after a power loss.

// Event kinds of the orphan handling.
const (
	EventOrphansEnded   = "attempt.orphans_ended"
	EventAttemptBlocked = "task.unknown"
	EventAttemptAdopted = "task.adopted"
	// TaskUnknown is the state of a task whose earlier attempt may have
	// taken effect: settle it with pipec resolve.
	TaskUnknown = "unknown"
)

// settleOrphans ends the orphans of every unfinished attempt of the earlier
// runs of the interval, then lets each non-idempotent task's attempts decide
// what it may do (settlePrior).
func (r *runner) settleOrphans(ctx context.Context, prior []store.Run) error {
	byTask := map[string][]store.Attempt{}
	var open []store.Attempt
	for _, pr := range prior {
		as, err := r.st.Attempts(ctx, pr.ID)
		if err != nil {
			return err
		}
		for _, a := range as {
			byTask[a.Task] = append(byTask[a.Task], a)
			if !a.State.Finished() {
				open = append(open, a)
			}
		}
	}
	if err := r.endOrphans(ctx, open); err != nil {
		return err
	}
	for _, task := range slices.Sorted(mapKeys(byTask)) {
		if ts := r.tasks[task]; ts != nil {
			if err := r.settlePrior(ctx, ts, byTask[task]); err != nil {
				return err
			}
		}
	}
	return nil
}

// blockTask does not run a task whose earlier attempt may have taken effect.
func (r *runner) blockTask(ctx context.Context, ts *taskState, why string) {
	r.mu.Lock()
	ts.state, ts.res.State, ts.res.Reason = TaskUnknown, TaskUnknown, why
	r.mu.Unlock()
	r.record(ctx, EventAttemptBlocked, ts.t.Name, 0, map[string]any{"reason": why})
	for _, out := range ts.t.Outputs {
		r.skipChecksAndPublishes(out, fmt.Sprintf("the outcome of task %s is unknown", ts.t.Name))
	}
}

// adoptTask completes a non-idempotent task from its succeeded attempt of an
// earlier run instead of running it again: an output with an accepted
// version is published again (idempotent), one without is audited and
// published from the attempt's staging directory.
func (r *runner) adoptTask(ctx context.Context, ts *taskState, a store.Attempt) {
	why := fmt.Sprintf("attempt %d of %s succeeded; a task that is not idempotent is not run again", a.Number, a.Run)
	if a.Class == store.ClassResolved {
		why = fmt.Sprintf("attempt %d of %s was resolved as succeeded (%s); a task that is not idempotent is not run again",
			a.Number, a.Run, a.ErrorTail)
	}
	r.mu.Lock()
	ts.state, ts.res.State, ts.res.Reason = TaskReused, TaskReused, why
	r.mu.Unlock()
	r.record(ctx, EventAttemptAdopted, ts.t.Name, a.Number, map[string]any{"reason": why, "run_of_attempt": a.Run})
	r.releaseClaim(ctx)
	l := &launched{a: a, staging: map[string]string{}}
	for _, out := range ts.t.Outputs {
		if v, err := r.st.AcceptedVersion(ctx, r.plan.Pipeline, out, r.iv.Key); err == nil && v.Run == a.Run && v.Task == a.Task && v.Attempt == a.Number {
			if edited, err := r.checksEditedSince(ctx, v.Run, ts); edited || err != nil {
				r.reaudit(ctx, ts, a, v, err)
				continue
			}
			for _, c := range r.checksOf[out] {
				r.setCheck(c.Name, CheckResult{Name: c.Name, Artifact: out, State: CheckPassed, Version: v.Label(),
					Reason: "accepted in " + v.Run})
			}
			r.publishAll(ctx, v, true)
			continue
		}
		dir, err := sink.StagingPath(filepath.Join(r.stateDir, "staging"), a.Run, a.Task, a.Number, out)
		if err != nil {
			r.skipChecksAndPublishes(out, err.Error())
			continue
		}
		if _, err := os.Stat(dir); err != nil {
			if why := r.restage(ctx, ts, a, out, dir); why != "" {
				r.skipChecksAndPublishes(out, why)
				continue
			}
		}
		l.staging[out] = dir
	}
	if len(l.staging) > 0 {
		r.produce(ctx, ts.t, l, false)
	}
}

// restage puts back into dir, this runner's staging folder for attempt
// a's output out, the version a recorded of it: a visit stopped before the
// version's fate was recorded left it, and its staging folder is not here
// (on another worker's machine, or gone with it). The version went into
// the artifact store before it was recorded (produceOutput), so any
// machine audits it from there. A version a check rejected is audited
// again, reopened, when its checks may now judge otherwise (auditsAgain:
// a check that was wrong, fixed): the task is not run again to make
// another. It returns why it cannot ("" when dir holds the version's
// files again).
func (r *runner) restage(ctx context.Context, ts *taskState, a store.Attempt, out, dir string) string {
	gone := fmt.Sprintf("output %s of attempt %d of %s has no accepted version and is not staged any more", out, a.Number, a.Run)
	const notAgain = "; a task that is not idempotent is not run again (--force runs it)"
	v, err := r.st.AttemptVersion(ctx, a.AttemptRef, out, r.iv.Key)
	reopen := "" // why a rejected version is audited again
	switch {
	case errors.Is(err, store.ErrNotFound):
		return gone + notAgain // its run stopped before it was frozen
	case err != nil:
		r.noteStore(err)
		return fmt.Sprintf("output %s of attempt %d of %s: its version could not be read: %v", out, a.Number, a.Run, err)
	case v.State == store.VersionRejected:
		gone = fmt.Sprintf("output %s of attempt %d of %s was rejected: %s", out, a.Number, a.Run, v.Reason)
		again, err := r.auditsAgain(ctx, ts, a.Run, out)
		if err != nil {
			r.noteStore(err)
			return fmt.Sprintf("%s, and the checks that rejected it could not be read: %v", gone, err)
		}
		if again == "" {
			return gone + "; a task that is not idempotent is not run again: a check of " + out +
				" new or edited since audits this version again, and --force runs the task again"
		}
		reopen = fmt.Sprintf("%s (it was rejected: %s)", again, v.Reason)
	case v.State != store.VersionStaged:
		return gone + notAgain
	}
	files, err := artifacts.Files(ctx, r.arts, v.Location)
	if err != nil {
		return fmt.Sprintf("%s, and its version %s cannot be read from the artifact store: %v%s", gone, v.Label(), err, notAgain)
	}
	if reopen != "" {
		if err := r.st.ReopenVersion(ctx, v.ID, reopen); err != nil {
			r.noteStore(err)
			return fmt.Sprintf("%s, and could not be audited again: %v", gone, err)
		}
		r.emitStore(store.EventVersionReopened, ts.t.Name, a.Number, map[string]any{"version": v.ID, "label": v.Label(), "token": v.Token, "reason": reopen})
	}
	// A copy of its own: the audit and the put read the staging folder, and
	// produce removes it once the version's fate is recorded.
	copied, digest, err := sink.Freeze(files, filepath.Dir(dir))
	if err == nil && digest != v.Digest {
		err = fmt.Errorf("the artifact store's copy has digest %s", digest)
		_ = os.RemoveAll(copied)
	}
	if err == nil {
		err = os.Rename(copied, dir)
	}
	if err != nil {
		return fmt.Sprintf("%s, and its version %s could not be staged here again from the artifact store: %v%s", gone, v.Label(), err, notAgain)
	}
	return ""
}

// auditsAgain says why a version of ts's output out that a check rejected
// in run is audited again ("" when it is not): a check of out is new or
// edited since, or one runs a command, whose verdict may depend on more
// than the version's bytes (a database it compares with, away then). The
// built-in checks judge the bytes alone: the same ones reject them again.
func (r *runner) auditsAgain(ctx context.Context, ts *taskState, run, out string) (string, error) {
	edited, err := r.checksEditedSince(ctx, run, ts)
	if err != nil {
		return "", err
	}
	if edited {
		return fmt.Sprintf("a check of %s is new or edited since %s", out, run), nil
	}
	for _, c := range r.checksOf[out] {
		if len(c.Command) > 0 {
			return fmt.Sprintf("check %s runs a command, whose verdict may change", c.Name), nil
		}
	}
	return "", nil
}

// checksEditedSince reports whether a check of ts's outputs is new or
// edited since run defined the task (compiler.ChecksEdited).
func (r *runner) checksEditedSince(ctx context.Context, run string, ts *taskState) (bool, error) {
	digests, err := r.defined.of(ctx, r.st, run)
	if err != nil || digests == nil {
		return false, err
	}
	return compiler.ChecksEdited(digests[ts.t.Name], r.digests[ts.t.Name]), nil
}

// reaudit audits v, the accepted version an adopted attempt a made, with
// the checks of its artifact as the spec has them now: one of them is new
// or edited since v was accepted, and a task that is not idempotent is not
// run again to make another. It audits a private copy when a check runs a
// command, so that no check can change the accepted version. Passed, v is
// published as any reused version; failed (or err, reading what the run
// that made it defined), its publishes and its readers in this run are
// not run, and the run fails. The version stays accepted, and visible
// where it was published: a sink is never rolled back.
func (r *runner) reaudit(ctx context.Context, ts *taskState, a store.Attempt, v store.Version, err error) {
	out := v.Artifact
	refuse := func(why string) {
		r.mu.Lock()
		r.rejected[out] = why
		r.mu.Unlock()
		r.skipChecksAndPublishes(out, why)
	}
	if err != nil {
		r.noteStore(err)
		refuse("the checks it was accepted by could not be read: " + err.Error())
		return
	}
	dir, err := artifacts.Files(ctx, r.arts, v.Location)
	if err != nil {
		refuse(fmt.Sprintf("%s could not be read from the artifact store to audit it again: %v", v.Label(), err))
		return
	}
	if slices.ContainsFunc(r.checksOf[out], func(c compiler.PlanCheck) bool { return len(c.Command) > 0 }) {
		tmp, err := os.MkdirTemp("", "pipec-reaudit-")
		if err != nil {
			refuse(fmt.Sprintf("no folder to audit %s again: %v", v.Label(), err))
			return
		}
		defer os.RemoveAll(tmp)
		if dir, _, err = sink.Freeze(dir, tmp); err != nil {
			refuse(fmt.Sprintf("%s could not be copied to audit it again: %v", v.Label(), err))
			return
		}
	}
	failed, _, _, cut := r.auditVersion(ctx, ts.t.Name, a.Number, v, dir, true, func() bool { return ctx.Err() != nil })
	switch {
	case cut:
		r.skipChecksAndPublishes(out, cancelReason(ctx))
	case failed != "":
		r.mu.Lock()
		r.rejected[out] = failed
		r.mu.Unlock()
		r.skipPublishes(out, fmt.Sprintf("artifact %s, accepted in %s, fails a check new or edited since: %s", out, v.Run, failed))
	default:
		r.publishAll(ctx, v, true)
	}
}

// killedByOther is called when an attempt's process was killed by a signal
// pipec did not send. On this host that is what a run that took the
// interval over does to the processes of the run it abandoned (see
// settleOrphans): if the lease is gone, this run stops now and says why,
// rather than reporting the task as killed and retrying it beside the run
// that owns the interval.
func (r *runner) killedByOther(ctx context.Context) {
	if r.loseRun == nil || r.o.RunLease <= 0 || r.runID == "" {
		return
	}
	if err := r.st.RenewRunLease(r.records, r.runID, r.o.RunLease); errors.Is(err, store.ErrLeaseLost) {
		r.loseRun(leaseLost{run: r.runID, interval: r.iv.Key})
	}
}
