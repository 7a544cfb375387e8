package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/artifacts"
	"github.com/pipec/pipec/runtime/audit"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
)

// Check states in a summary.
const (
	CheckPassed = "passed"
	CheckFailed = "failed"
)

// produce is write-audit-publish for a finished, successful attempt: each
// output's staging directory is digested and recorded as a version, audited
// by every check on the artifact, accepted or rejected, and an accepted one
// is published to every sink its publishes name, with the attempt's token.
// zombie marks an attempt whose lease expired and whose task was relaunched:
// its results go into the record but not into the summary's checks. lost,
// when set, is why a local run relaunches the attempt (lostAttempt): the
// state no longer had it when its version was recorded, and produce stops.
// Nothing of it is visible then: an acceptance is a synchronous commit,
// which would have made the attempt's own records durable before it.
func (r *runner) produce(ctx context.Context, t *compiler.PlanTask, l *launched, zombie bool) (lost string) {
	keep := r.keeping(ctx, t)
	if len(l.staging) > 0 {
		if err := r.awaitCollection(keep, t, l); err != nil {
			if keep.Err() != nil {
				for _, out := range t.Outputs {
					if _, ok := l.staging[out]; ok {
						r.leaveOutput(ctx, t, l, out, cancelReason(ctx), zombie)
					}
				}
				return ""
			}
			why := fmt.Sprintf("not put into the artifact store: waiting for pipec gc to finish: %v", err)
			r.storeFailed(fmt.Sprintf("reading pipec gc's holds for the outputs of %s#%d: %v", t.Name, l.a.Number, err), err)
			for _, out := range t.Outputs {
				if _, ok := l.staging[out]; ok {
					r.rejectOutput(ctx, t, l, out, nil, why, zombie)
				}
			}
			return ""
		}
	}
	for _, out := range t.Outputs {
		staging, ok := l.staging[out]
		if !ok {
			continue // an adopted attempt's output that is already accepted
		}
		lost, kept := r.produceOutput(ctx, keep, t, l, out, staging, zombie)
		if !kept {
			// The version's fate is recorded (accepted, or rejected for
			// its own reasons): the attempt's staging folder goes once its
			// last output is settled (Remove fails while not empty).
			_ = os.RemoveAll(staging)
			_ = os.Remove(filepath.Dir(staging))
		}
		if lost != "" {
			return lost
		}
	}
	return ""
}

// keeping is the context of what keeps t's output once its process
// succeeded (gc's hold waited for, the put into the artifact store, the
// version's record): ctx for a task that may run again, and for one that
// is not idempotent, whose effect happened, the run's records (which
// ctx's end, a stop, does not end at once): a worker stopped then (a
// scale-down's SIGTERM) still puts and records the output, and a later
// visit on any machine audits it (restage), where it would otherwise stay
// on this machine alone.
func (r *runner) keeping(ctx context.Context, t *compiler.PlanTask) context.Context {
	if t.Idempotent || r.records == nil {
		return ctx
	}
	return r.records
}

// produceOutput is produce for one output staged in staging; kept is true
// when its staging folder must stay: the output could not be frozen, or
// the run was stopped (ctx ended: Ctrl-C, a lost lease on the interval)
// before the version's fate was recorded, and the staging is then what a
// later run audits again (adoptTask), where a non-idempotent task is not
// run again. keep is the context of the early put and the record
// (keeping).
func (r *runner) produceOutput(ctx, keep context.Context, t *compiler.PlanTask, l *launched, out, staging string, zombie bool) (lost string, kept bool) {
	stopped := func() bool {
		if ctx.Err() == nil {
			return false
		}
		r.leaveOutput(ctx, t, l, out, cancelReason(ctx), zombie)
		return true
	}
	// refused: the state did not record what doing asked of the version;
	// the staging stays either way (a later run audits it again).
	refused := func(doing string, err error) (string, bool) {
		if !stopped() {
			r.storeFailed(fmt.Sprintf("%s output %s of %s#%d: %v", doing, out, t.Name, l.a.Number, err), err)
			r.rejectOutput(ctx, t, l, out, nil, fmt.Sprintf("%s output %s: %v", doing, out, err), zombie)
		}
		return "", true
	}
	// Frozen before anything reads it: the audit reads this immutable
	// copy on this machine, never the staging directory something may
	// still write into, and the artifact store gets these bytes.
	frozen, inStore := r.frozenRoot(staging, out)
	dir, digest, err := sink.Freeze(staging, frozen)
	if err != nil && inStore && !r.artsLocal {
		// The shared store's folder refused (its permissions, say):
		// frozen beside the staging, the put says what the store
		// refuses, as the store's failure rather than the output's.
		frozen, inStore = r.frozenBeside(staging, out), false
		dir, digest, err = sink.Freeze(staging, frozen)
	}
	if ee := (*sink.EntryError)(nil); errors.As(err, &ee) {
		why := fmt.Sprintf("output %s: %v", out, ee) // the staging path is no help
		if !zombie {
			// The task's own doing, unlike a disk that filled up: it
			// fails the task's visit, and the run, as a failed check does.
			r.mu.Lock()
			r.unreadable[out] = fmt.Sprintf("%s of %s#%d was not accepted: %s", out, t.Name, l.a.Number, why)
			r.mu.Unlock()
		}
		r.rejectOutput(ctx, t, l, out, nil, why, zombie)
		return "", true
	}
	if err != nil {
		// This machine's doing (its disk full or read-only, an I/O
		// error), not the output's: on workers the task fails over
		// (ClassDisk), and the output of a task that is not run again
		// is left staged for a later run here, once the disk has room.
		why := fmt.Sprintf("output %s could not be frozen on this machine: %v", out, err)
		if !zombie {
			r.mu.Lock()
			if r.diskErr == "" {
				r.diskErr = fmt.Sprintf("output %s of %s#%d could not be frozen on this machine: %v", out, t.Name, l.a.Number, err)
			}
			r.mu.Unlock()
		}
		if !t.Idempotent {
			r.leaveOutput(ctx, t, l, out, why, zombie)
		} else {
			r.rejectOutput(ctx, t, l, out, nil, why, zombie)
		}
		return "", true
	}
	key, err := artifacts.NewKey(r.plan.Pipeline, out, digest)
	if err != nil {
		r.rejectOutput(ctx, t, l, out, nil, fmt.Sprintf("output %s: %v", out, err), zombie)
		return "", false
	}
	// A task that is not idempotent is not run again to make its output
	// anew: the output goes into the artifact store before it is recorded
	// and audited, so that if this visit stops before its fate is
	// recorded, a later one on any machine audits it from there
	// (restage). Others are put once their checks passed.
	early := !t.Idempotent
	// putFailed: the version is not accepted, so nothing reads it; it is
	// rejected (v, when recorded), with the reason, and the task's
	// dependents are not run; an early put's output is left instead.
	putFailed := func(v *store.Version, err error) (string, bool) {
		if stopped() {
			return "", true
		}
		why := fmt.Sprintf("could not be put into the artifact store: %v", err)
		if !zombie {
			r.mu.Lock()
			if r.artsErr == "" {
				r.artsErr = fmt.Sprintf("output %s of %s#%d %s", out, t.Name, l.a.Number, why)
			}
			r.mu.Unlock()
		}
		if early {
			// Not the output's doing, and its task is not run again to
			// make it anew (an outage of the store would cost it for
			// good): left staged, as by a stopped run, for the next run
			// to put and audit.
			r.leaveOutput(ctx, t, l, out, why, zombie)
			return "", true
		}
		r.rejectOutput(ctx, t, l, out, v, why, zombie)
		return "", false
	}
	if early {
		if err := r.putVersion(keep, key, dir); err != nil {
			return putFailed(nil, err)
		}
		if _, err := os.Stat(dir); err != nil {
			// The store took the folder (a move): the audit reads the
			// version where it now is.
			if dir, err = r.arts.Get(keep, key); err != nil {
				return putFailed(nil, err)
			}
			inStore = true
		}
	}
	rec := store.Version{Artifact: out, Interval: r.iv.Key, Digest: digest, Run: l.a.Run,
		Task: t.Name, Attempt: l.a.Number, Location: key.String()}
	v, err := r.st.RecordVersion(keep, rec)
	if !zombie {
		if lost := r.lostAttempt(ctx, t, l, err); lost != "" {
			return lost, false
		}
	}
	if err != nil {
		return refused("recording", err)
	}
	r.versionRecorded(t, l, v)
	if stopped() {
		return "", true // recorded, not audited: a later run audits it
	}
	failed, passed, damaged, cut := r.auditVersion(ctx, t.Name, l.a.Number, v, dir, !zombie, stopped)
	if cut {
		return "", true // a check cut short by the run's stop is no verdict
	}
	if damaged {
		// Not left where the key's next put would take it for these
		// bytes.
		if inStore {
			_ = r.arts.Drop(ctx, key)
		} else {
			_ = os.RemoveAll(frozen)
		}
	}
	if failed != "" {
		r.rejectOutput(ctx, t, l, out, &v, failed, zombie)
		return "", false
	}
	// Into the shared artifact store, durably, before the version is
	// accepted: nothing downstream (a task on any worker, a sink) reads
	// a version before it is accepted, and then reads it from there.
	if !early {
		if err := r.putVersion(ctx, key, dir); err != nil {
			return putFailed(&v, err)
		}
	}
	if !inStore {
		// This worker's frozen copy was only for the audit and the put.
		_ = os.RemoveAll(frozen)
		_ = os.Remove(filepath.Dir(frozen))
	}
	err = r.st.AcceptVersion(ctx, v.ID)
	if errors.Is(err, store.ErrNotFound) {
		// A crash of the state's server took the version's record back
		// (an asynchronous commit) before its acceptance: recorded
		// again, it is accepted now. Its checks passed on these bytes.
		if v, err = r.st.RecordVersion(ctx, rec); err == nil {
			r.versionRecorded(t, l, v)
			err = r.st.AcceptVersion(ctx, v.ID)
		}
	}
	if err != nil {
		return refused("accepting", err)
	}
	v.State = store.VersionAccepted
	r.mu.Lock()
	r.acceptedBy[v.ID] = passed
	if !zombie {
		delete(r.rejected, v.Artifact) // the current attempt's verdict speaks for the task
	}
	r.mu.Unlock()
	r.emitStore(store.EventVersionAccepted, t.Name, l.a.Number, map[string]any{"version": v.ID, "label": v.Label(), "token": v.Token})
	r.publishAll(ctx, v, !zombie)
	return "", false
}

// leaveOutput leaves output out of attempt l staged, unaudited, because of
// why: the run was stopped (ctx ended), or the artifact store could not
// take a non-idempotent task's output. Its checks and publishes do not run
// here, saying why, and a later run of the interval audits it (adoptTask)
// or, for an idempotent task, runs the task again. Nothing about the
// output itself failed, so nothing is rejected and the state is not
// blamed.
func (r *runner) leaveOutput(ctx context.Context, t *compiler.PlanTask, l *launched, out, why string, zombie bool) {
	r.record(ctx, EventOutputLeft, t.Name, l.a.Number, map[string]any{"artifact": out, "reason": why})
	if !zombie {
		// Its readers in this run are not run: an accepted version an
		// earlier run left is not what the task made now.
		r.mu.Lock()
		r.rejected[out] = "not audited: " + why
		r.mu.Unlock()
		r.skipChecksAndPublishes(out, "not audited: "+why)
	}
}

// versionRecorded tells the progress feed that attempt l of t recorded
// version v.
func (r *runner) versionRecorded(t *compiler.PlanTask, l *launched, v store.Version) {
	r.emitStore(store.EventVersionRecorded, t.Name, l.a.Number, map[string]any{"version": v.ID, "label": v.Label(), "token": v.Token})
}

// frozenRoot is where an output is frozen (sink.Freeze puts it in
// <root>/<hex digest>), and whether that is in the artifact store. With the
// default store, beside the state, or a shared folder store on the state's
// filesystem, it is the version's folder in the store itself
// (<store>/<pipeline>/<artifact>/<digest>), and the put keeps it: one copy
// and its fsyncs, not a second folder moved in and synced again. A rejected
// output's copy stays there, where nothing refers to it, and pipec gc
// removes it. Otherwise it is frozenBeside. (Asked per output, not per
// visit: most visits freeze nothing.)
func (r *runner) frozenRoot(staging, artifact string) (string, bool) {
	if f, ok := r.arts.(*artifacts.Folder); ok && (r.artsLocal || f.OnFilesystemOf(r.stateDir)) {
		return filepath.Join(f.Root, r.plan.Pipeline, artifact), true
	}
	return r.frozenBeside(staging, artifact), false
}

// frozenBeside is a folder of the attempt's own, beside its staging, for a
// store on another filesystem or another machine: the audit reads this
// copy, the put sends it, and it is removed after (one attempt removing its
// copy cannot take away another attempt's of the same bytes); a rejected
// output's copy stays, and pipec gc removes it with the attempt's staging.
func (r *runner) frozenBeside(staging, artifact string) string {
	return filepath.Join(filepath.Dir(staging), ".frozen-"+artifact)
}

// SharedArtifacts is where a plan's shared artifact store is: flag (a
// command's --artifacts: a worker may mount the shared folder at its own
// path, so it wins), else the plan's artifacts field (relative: to
// baseDir, the spec's folder); a folder is made absolute, an object
// store's URL kept as given. "" when neither names one.
func SharedArtifacts(flag string, plan *compiler.Plan, baseDir string) (string, error) {
	root := flag
	if root == "" && plan != nil && plan.ArtifactStore != "" {
		root = plan.ArtifactStore
		if !filepath.IsAbs(root) && !strings.Contains(root, "://") {
			root = filepath.Join(baseDir, root)
		}
	}
	if root == "" || strings.Contains(root, "://") {
		return root, nil
	}
	return filepath.Abs(root)
}

// openArtifacts opens the run's artifact store: SharedArtifacts, else
// Options.DefaultArtifacts, else versions/ beside the state, where a local
// run always kept its versions; local is true then.
func openArtifacts(o Options, stateDir string) (s artifacts.Store, local bool, err error) {
	root, err := SharedArtifacts(o.Artifacts, o.Plan, o.BaseDir)
	if err != nil {
		return nil, false, err
	}
	if root == "" && o.DefaultArtifacts != "" {
		if root, err = SharedArtifacts(o.DefaultArtifacts, nil, ""); err != nil {
			return nil, false, err
		}
	}
	if root == "" {
		root, local = filepath.Join(stateDir, "versions"), true
	}
	// An object store's versions are downloaded into this process's
	// scratch folder (a worker's --workdir).
	s, err = artifacts.OpenIn(root, filepath.Join(stateDir, "cache"), o.ObjectStores)
	return s, local, err
}

// putsOutputs reports whether a task of the runner has outputs to put
// into the artifact store.
func (r *runner) putsOutputs() bool {
	for _, ts := range r.tasks {
		if len(ts.t.Outputs) > 0 {
			return true
		}
	}
	return false
}

// ownOutputs is ownArtifacts, for a task with outputs.
func (r *runner) ownOutputs(ctx context.Context, t *compiler.PlanTask) error {
	if len(t.Outputs) == 0 {
		return nil
	}
	return r.ownArtifacts(ctx)
}

// ownArtifacts makes sure the run's artifact store keeps the pipeline's
// versions for this state (artifacts.Own): asked before a run or a visit
// starts a task with outputs, so that a store another state owns is
// refused before such a task runs, and before every put, which it guards;
// answered once a runner. versions/ beside the state is the state's own.
func (r *runner) ownArtifacts(ctx context.Context) error {
	if r.artsLocal {
		return nil
	}
	r.owned.Lock()
	defer r.owned.Unlock()
	if r.ownAsked {
		return r.ownErr
	}
	err := artifacts.Own(ctx, r.arts, r.plan.Pipeline, artifacts.Owner{State: r.stateID,
		StatePath: r.statePlace()})
	var foreign *artifacts.ForeignOwnerError
	if err == nil || errors.As(err, &foreign) {
		r.ownAsked, r.ownErr = true, err
	}
	return err
}

// sinksTake refuses, with a *sink.ForeignStateError, a sink bound to
// another state that t's outputs (every task's, t nil) are published to:
// asked before a run, or a visit of t, runs anything, as every publish into
// it would be refused once the task ran (a non-idempotent task's effect
// done, its outputs never visible). Any other error reading a sink's
// binding is left to the publish, which says it.
func (r *runner) sinksTake(ctx context.Context, t *compiler.PlanTask) error {
	tasks := []*compiler.PlanTask{t}
	if t == nil {
		tasks = tasks[:0]
		for _, ts := range r.tasks {
			tasks = append(tasks, ts.t)
		}
	}
	var names []string
	for _, t := range tasks {
		for _, out := range t.Outputs {
			for _, pub := range r.pubsOf[out] {
				names = append(names, pub.Sink)
			}
		}
	}
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		if err := sink.RefusesState(ctx, r.sinks[name], r.stateID); err != nil {
			return err
		}
	}
	return nil
}

// RefusedEveryInterval reports whether err, a run's refusal before it
// started, holds for every interval of the pipeline on this state: a sink
// bound to another state (sinksTake), or an artifact store whose versions
// of the pipeline another state owns (ownArtifacts). A backfill stops at
// it rather than be refused once per interval.
func RefusedEveryInterval(err error) bool {
	var foreignSink *sink.ForeignStateError
	var foreignArts *artifacts.ForeignOwnerError
	return errors.As(err, &foreignSink) || errors.As(err, &foreignArts)
}

// putVersion puts the frozen version in dir into the artifact store under
// key, durably, once this state owns the pipeline's versions there.
func (r *runner) putVersion(ctx context.Context, key artifacts.Key, dir string) error {
	if err := r.ownArtifacts(ctx); err != nil {
		return err
	}
	return r.arts.Put(ctx, key, dir)
}

// needsSharedArtifacts says why a worker's visit of t needs a shared
// artifact store ("" when it does not): t reads inputs, which another worker
// may have produced, or another task (on any worker, in this run or a
// later one) reads one of its outputs. Checks and publishes of its outputs
// run in the same visit, so they alone need none.
func needsSharedArtifacts(p *compiler.Plan, t *compiler.PlanTask) string {
	if len(t.Inputs) > 0 {
		return fmt.Sprintf("task %s reads %s, which another worker may have produced", t.Name, inputName(t.Inputs[0]))
	}
	for i := range p.Tasks {
		for _, in := range p.Tasks[i].Inputs {
			for _, out := range t.Outputs {
				if in.Artifact == out {
					return fmt.Sprintf("task %s writes %s, which task %s reads, maybe on another worker", t.Name, out, p.Tasks[i].Name)
				}
			}
		}
	}
	return ""
}

// auditVersion runs the checks of v's artifact on dir, its frozen copy
// (of v.Digest), as attempt number of task records them (each check's
// event; with current, its result in the summary too). failed says the
// first check that failed, passed those that passed; damaged, that a
// command check wrote into dir; cut, that the run stopped during a check
// (stopped, asked then, said so), which is no verdict.
func (r *runner) auditVersion(ctx context.Context, task string, attempt int, v store.Version, dir string, current bool,
	stopped func() bool) (failed string, passed []sink.ManifestCheck, damaged, cut bool) {
	out := v.Artifact
	for _, c := range r.checksOf[out] {
		var before folderState
		if len(c.Command) > 0 {
			before, _ = listFolder(dir)
		}
		ok, why := r.runCheck(ctx, c, dir)
		if len(c.Command) > 0 && !damaged {
			// A command check gets the version's own folder: one that
			// wrote into it changed what would be accepted.
			if what, _ := folderChanged(dir, v.Digest, before); what != "" {
				ok, why, damaged = false, "the check changed the version it audits ("+what+"): a check reads its input, never writes into it", true
			}
		}
		if !ok && !damaged && stopped() {
			return "", nil, false, true
		}
		kind := EventCheckPassed
		data := map[string]any{"check": c.Name, "artifact": out, "version": v.ID, "label": v.Label()}
		if !ok {
			kind = EventCheckFailed
			data["reason"] = why
			if failed == "" {
				failed = fmt.Sprintf("check %s failed: %s", c.Name, why)
			}
		}
		r.record(ctx, kind, task, attempt, data)
		if ok {
			passed = append(passed, sink.ManifestCheck{Name: c.Name, Run: r.runID})
		}
		if current {
			state := CheckPassed
			if !ok {
				state = CheckFailed
			}
			r.setCheck(c.Name, CheckResult{Name: c.Name, Artifact: out, State: state, Version: v.Label(), Reason: why})
		}
	}
	return failed, passed, damaged, false
}

// rejectOutput records why an output is not accepted; its publishes are not
// run (only the current attempt's verdict speaks for the task).
func (r *runner) rejectOutput(ctx context.Context, t *compiler.PlanTask, l *launched, out string, v *store.Version, why string, zombie bool) {
	if v != nil {
		_ = r.st.RejectVersion(ctx, v.ID, why)
		r.emitStore(store.EventVersionRejected, t.Name, l.a.Number, map[string]any{"version": v.ID, "label": v.Label(), "token": v.Token, "reason": why})
	} else {
		// No version to reject (the output could not be frozen or
		// recorded): the log still says why nothing was accepted.
		r.record(ctx, EventOutputRejected, t.Name, l.a.Number, map[string]any{"artifact": out, "reason": why})
	}
	if !zombie {
		r.mu.Lock()
		r.rejected[out] = why
		r.mu.Unlock()
		r.skipPublishes(out, "artifact "+out+" was not accepted: "+why)
		for _, c := range r.checksOf[out] {
			r.mu.Lock()
			if cr := r.checks[c.Name]; cr.State == TaskNotRun && cr.Reason == "" {
				cr.Reason = why
			}
			r.mu.Unlock()
		}
	}
}

// runCheck audits one staged version with one check (package audit: the
// built-in assertions on CSV and JSON Lines, then the check's command).
func (r *runner) runCheck(ctx context.Context, c compiler.PlanCheck, dir string) (bool, string) {
	env := append(slices.Clip(r.baseEnv),
		"PIPEC_RUN_ID="+r.runID,
		"PIPEC_INTERVAL_START="+r.iv.Start.Format(time.RFC3339),
		"PIPEC_INTERVAL_END="+r.iv.End.Format(time.RFC3339),
		"PIPEC_CODE_VERSION="+r.plan.CodeVersion,
	)
	res, err := audit.Run(ctx, c, dir, audit.Options{Dir: r.o.BaseDir, Env: env, CodeVersion: r.plan.CodeVersion,
		Redact: r.red.String})
	if err != nil {
		return false, "the check could not run: " + err.Error()
	}
	if !res.Accepted {
		return false, strings.Join(res.Reasons, "; ")
	}
	return true, ""
}

// publishAll publishes an accepted version to every publish of its artifact.
// current is false for a zombie attempt, whose outcome is recorded but does
// not speak for the publish in the summary unless it was fenced.
func (r *runner) publishAll(ctx context.Context, v store.Version, current bool) {
	for _, pub := range r.pubsOf[v.Artifact] {
		pr := PublishResult{Name: pub.Name, Sink: pub.Sink, Artifact: v.Artifact, Version: v.Label(), Token: v.Token,
			Task: v.Task, Attempt: v.Attempt}
		d := r.sinks[pub.Sink]
		if d == nil {
			pr.Outcome = PublishError
			pr.Error = r.sinkErr[pub.Sink]
			if pr.Error == "" {
				pr.Error = fmt.Sprintf("sink %q is not defined", pub.Sink)
			}
			r.record(ctx, EventPublishFailed, v.Task, v.Attempt, map[string]any{"publish": pub.Name, "error": pr.Error})
			if current {
				r.addPublish(pr)
			}
			continue
		}
		res, err := d.Publish(ctx, v)
		if err != nil {
			pr.Outcome = PublishError
			pr.Error = err.Error()
			r.record(ctx, EventPublishFailed, v.Task, v.Attempt, map[string]any{"publish": pub.Name, "error": pr.Error})
			if current {
				r.addPublish(pr)
			}
			continue
		}
		pr.Outcome = string(res.Outcome)
		pr.Visible, pr.VersionDir, pr.AtLeastOnce = res.Visible, res.VersionDir, res.Unfenced
		data := map[string]any{"publish": pub.Name, "sink": pub.Sink, "artifact": v.Artifact, "interval": v.Interval,
			"version": v.ID, "label": v.Label(), "token": v.Token,
			"visible": res.Visible, "pointer_token": res.Pointer.Token}
		if res.Outcome == store.Fenced {
			data["held_token"], data["fenced_by"] = res.HeldToken, res.FencedBy
		}
		if res.Unfenced {
			data["unfenced"] = true
		}
		r.emitStore("publish."+string(res.Outcome), v.Task, v.Attempt, data)
		if res.Outcome == store.Fenced {
			r.mu.Lock()
			r.fenced = append(r.fenced, FencedPublish{Publish: pub.Name, Sink: pub.Sink, Artifact: v.Artifact, Task: v.Task,
				Attempt: v.Attempt, Run: v.Run, Token: v.Token, HeldBy: res.HeldToken, FencedBy: res.FencedBy})
			r.mu.Unlock()
		}
		if current && res.Outcome == store.Fenced && res.FencedBy == "sink" {
			// The sink holds a newer token than this run's own version: a
			// version accepted before the sink was adopted by this state
			// (or a state restored from a backup). Nothing of this run is
			// visible there; say so and fail rather than succeed quietly.
			pr.Outcome = PublishError
			pr.Error = fmt.Sprintf("sink %s holds token %d, above this version's token %d (accepted before this state "+
				"adopted the sink, or in a state restored from a backup): rerun with --force to produce a new version",
				pub.Sink, res.HeldToken, v.Token)
		}
		if current || res.Outcome != store.Fenced {
			r.addPublish(pr)
		}
	}
}

// storeFailed keeps the first failure of the state database (err, said
// as what), for the summary's store line.
func (r *runner) storeFailed(what string, err error) {
	r.noteStore(err)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.storeErr == "" {
		r.storeErr = what
	}
}

// noteStore keeps what kind of failure of the state database err is, for
// a visit's end (VisitResult.StoreTransient): only a visit whose every
// such failure was one the next visit will not meet hands its task back.
// Once an attempt of the run's was recorded, a record found missing is
// one the state lost (a crash of its server took back its last commits,
// asynchronous ones on PostgreSQL): a new visit records its own. Before,
// a missing record (the run's) would be missing for the next visit too.
func (r *runner) noteStore(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.storeSeen = true
	lost := errors.Is(err, store.ErrNotFound) && r.attemptRecorded
	if !errors.Is(err, store.ErrUnreachable) && !lost {
		r.storeHard = true
	}
}

// lineage is the sinks' Lineage: the pipeline, and the checks that accepted
// the version: those that passed in this run, or for a version an earlier run
// accepted (a reused task), every check of its artifact, in that run (a
// version is accepted only when all of them passed).
func (r *runner) lineage(v store.Version) (string, []sink.ManifestCheck) {
	r.mu.Lock()
	cs, ok := r.acceptedBy[v.ID]
	r.mu.Unlock()
	if !ok {
		for _, c := range r.checksOf[v.Artifact] {
			cs = append(cs, sink.ManifestCheck{Name: c.Name, Run: v.Run})
		}
	}
	return r.plan.Pipeline, cs
}

// addPublish keeps the latest outcome per publish.
func (r *runner) addPublish(pr PublishResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.publishes {
		if r.publishes[i].Name == pr.Name {
			if pr.Outcome == string(store.Fenced) && r.publishes[i].Outcome != PublishNotRun {
				return // a fenced zombie does not hide the publish that won
			}
			r.publishes[i] = pr
			return
		}
	}
	r.publishes = append(r.publishes, pr)
}

func (r *runner) skipChecksAndPublishes(artifact, why string) {
	r.mu.Lock()
	for _, c := range r.checksOf[artifact] {
		if cr := r.checks[c.Name]; cr.State == TaskNotRun {
			cr.Reason = why
		}
	}
	r.mu.Unlock()
	r.skipPublishes(artifact, why)
}

func (r *runner) skipPublishes(artifact, why string) {
	for _, pub := range r.pubsOf[artifact] {
		r.mu.Lock()
		found := false
		for i := range r.publishes {
			found = found || r.publishes[i].Name == pub.Name
		}
		r.mu.Unlock()
		if !found {
			r.addPublish(PublishResult{Name: pub.Name, Sink: pub.Sink, Artifact: artifact, Outcome: PublishNotRun, Error: why})
		}
	}
}

func (r *runner) setCheck(name string, c CheckResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks[name] = &c
}

// record appends a runtime event to the store's log and reports it.
func (r *runner) record(ctx context.Context, kind, task string, attempt int, data map[string]any) {
	ev := store.Event{Run: r.runID, Kind: kind, Task: task, Attempt: attempt}
	if data != nil {
		ev.Payload = marshalPayload(data)
	}
	if _, err := r.st.AppendEvent(r.records, ev); err != nil {
		// The log is the run's account: a gap in it fails the run.
		r.storeFailed(fmt.Sprintf("recording event %s: %v", kind, err), err)
	}
	r.emitStore(kind, task, attempt, data)
}

// emitStore reports an event the store already recorded.
func (r *runner) emitStore(kind, task string, attempt int, data map[string]any) {
	if r.o.OnEvent == nil {
		return
	}
	if data != nil {
		data, _ = r.red.Value(data).(map[string]any)
	}
	r.evMu.Lock()
	defer r.evMu.Unlock()
	r.o.OnEvent(Event{Time: time.Now().UTC(), Run: r.runID, Kind: kind, Task: task, Attempt: attempt, Data: data})
}
