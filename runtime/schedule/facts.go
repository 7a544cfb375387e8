package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// Facts is what the store says of one pipeline's intervals, read once (a
// few queries for the whole pipeline, one per visible version), so that
// deciding 730 intervals does not cost 730 round trips per question.
type Facts struct {
	plan *compiler.Plan
	st   store.Store
	// succeeded: the latest succeeded run of each interval key; current:
	// intervals with a succeeded run at the spec's code_version.
	succeeded map[string]string
	current   map[string]bool
	// running lists, per interval key, its runs that are in progress.
	running map[string]Running
	// visible holds, per "sink\x00artifact\x00interval", the version a
	// publish shows.
	visible map[string]store.Version
	// accepted caches AcceptedVersion lookups ("artifact\x00interval"):
	// the accepted version's digest, "" for none.
	accepted map[string]string
	// edited names, per interval's latest succeeded run, the tasks the
	// spec now defines otherwise than that run did (compiler.TaskDigest),
	// for the intervals a backfill decides (readEdits).
	// Every task of a run either ran there or was reused as defined alike,
	// so that run speaks for all its interval shows.
	edited map[string][]string
	// rechecked names, likewise, the tasks whose outputs a check new or
	// edited since audits (compiler.EditedChecks).
	rechecked map[string][]string
	// moved says, per interval key, what a task of the interval read of
	// another interval that the interval's accepted version has since
	// replaced by other content (readMoved), for the intervals a backfill
	// decides.
	moved map[string]string
}

// Running is a run in progress, as a skipped or blocked interval names it:
// the store's description, which CreateRun's refusals use too.
type Running = store.RunInProgress

// Read reads the facts of plan's pipeline from st; a nil st is a state
// where nothing ran yet (a dry run before the first run). q is st's queue,
// the workers' side of it (nil for a store that serves no workers): it
// tells a run handed to workers from a leftover.
func Read(ctx context.Context, st store.Store, q queue.Queue, plan *compiler.Plan) (*Facts, error) {
	f := &Facts{plan: plan, st: st, succeeded: map[string]string{}, current: map[string]bool{}, running: map[string]Running{},
		visible: map[string]store.Version{}, accepted: map[string]string{}, edited: map[string][]string{},
		rechecked: map[string][]string{}, moved: map[string]string{}}
	if st == nil {
		return f, nil
	}
	runs, err := st.ListRuns(ctx, store.RunFilter{Pipeline: plan.Pipeline})
	if err != nil {
		return nil, err
	}
	leases, err := st.RunLeases(ctx, plan.Pipeline)
	if err != nil {
		return nil, err
	}
	leaseOf := map[string]store.RunLease{}
	for _, l := range leases {
		leaseOf[l.Run] = l
	}
	for _, r := range runs { // oldest first: the last succeeded one wins
		switch r.State {
		case store.RunSucceeded:
			f.succeeded[r.Interval] = r.ID
			if r.CodeVersion == plan.CodeVersion {
				f.current[r.Interval] = true
			}
		case store.RunRunning:
			l, leased := leaseOf[r.ID]
			switch {
			case leased && l.Live:
				f.running[r.Interval] = Running{Run: r.ID, Interval: r.Interval, Owner: l.Owner, Since: l.Since}
			case !leased:
				// No lease: a run handed to workers, which go on with it
				// whoever submitted it, or a local run whose lease row a
				// later run took before it too died.
				sub, err := submitted(ctx, q, r.ID)
				if err != nil {
					return nil, err
				}
				if sub {
					f.running[r.Interval] = Running{Run: r.ID, Interval: r.Interval, Submitted: true}
				}
			}
			// A lease that expired is a run whose pipec is gone: the next
			// run of the interval takes it over, so it blocks nothing.
		}
	}
	sinks := map[string]bool{}
	for _, p := range plan.Publishes {
		sinks[p.Sink] = true
	}
	for _, sk := range slices.Sorted(mapKeys(sinks)) {
		ps, err := st.Pointers(ctx, plan.Pipeline, sk)
		if err != nil {
			return nil, err
		}
		vs, err := st.PointedVersions(ctx, plan.Pipeline, sk)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			v, ok := vs[p.Version]
			if !ok {
				// Swapped between the two reads.
				if v, err = st.GetVersion(ctx, p.Version); err != nil {
					return nil, fmt.Errorf("the version %d that %s shows for %s@%s: %w", p.Version, sk, p.Artifact, p.Interval, err)
				}
			}
			f.visible[sk+"\x00"+p.Artifact+"\x00"+p.Interval] = v
		}
	}
	return f, nil
}

// readEdits fills edited for the intervals ivs: one read of each one's
// latest succeeded run. Only a backfill asks (what is due never looks at
// the tasks of what succeeded), and only of its range.
func (f *Facts) readEdits(ctx context.Context, ivs []runtime.Interval) error {
	now := f.plan.TaskDigests()
	for _, iv := range ivs {
		id, ok := f.succeeded[iv.Key]
		if !ok {
			continue
		}
		if _, read := f.edited[id]; read {
			continue
		}
		f.edited[id] = nil
		r, err := f.st.GetRun(ctx, id)
		if err != nil {
			return err
		}
		if r.TaskDigests == nil {
			continue // recorded before runs kept them: alike, as reuse counts it
		}
		for _, name := range slices.Sorted(mapKeys(now)) {
			switch compiler.DefinitionEdit(r.TaskDigests[name], now[name]) {
			case compiler.EditedTask:
				f.edited[id] = append(f.edited[id], name)
			case compiler.EditedChecks:
				f.rechecked[id] = append(f.rechecked[id], name)
			}
		}
	}
	return nil
}

// readMoved fills moved for the intervals ivs that are complete (Status):
// for each task that reads another interval (raw@-1), the attempt whose
// result the interval shows (the maker of its output's accepted version;
// for a task without outputs, its latest succeeded attempt) and what it
// read there (store.Attempt.Reads), against that interval's accepted
// version now. A run of the interval would run such a task again
// (runtime's reuse compares the same); a backfill rebuilds it only with
// --stale, as an edit.
func (f *Facts) readMoved(ctx context.Context, ivs []runtime.Interval) error {
	var readers []*compiler.PlanTask
	for i := range f.plan.Tasks {
		if t := &f.plan.Tasks[i]; t.ReadsOtherIntervals() {
			readers = append(readers, t)
		}
	}
	if len(readers) == 0 {
		return nil
	}
	for _, iv := range ivs {
		if f.Status(iv).State != Complete {
			continue // rebuilt, or skipped, whatever it read
		}
		for _, t := range readers {
			maker, ok, err := f.maker(ctx, t, iv.Key)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			a, err := f.st.GetAttempt(ctx, maker)
			if err != nil {
				return err
			}
			moved, err := store.FirstMoved(a.Reads, func(artifact, interval string) (string, error) {
				return f.acceptedDigest(ctx, artifact, interval)
			})
			if err != nil {
				return err
			}
			if moved != nil {
				f.moved[iv.Key] = fmt.Sprintf("task %s read %s of %s, which was rebuilt since", t.Name, moved.Artifact, moved.Interval)
				break
			}
		}
	}
	return nil
}

// maker is the attempt whose result for t the interval shows: the maker of
// its first output's accepted version, or for a task without outputs its
// latest succeeded attempt; ok is false when there is none.
func (f *Facts) maker(ctx context.Context, t *compiler.PlanTask, interval string) (store.AttemptRef, bool, error) {
	if len(t.Outputs) > 0 {
		v, err := f.st.AcceptedVersion(ctx, f.plan.Pipeline, t.Outputs[0], interval)
		if errors.Is(err, store.ErrNotFound) {
			return store.AttemptRef{}, false, nil
		}
		return store.AttemptRef{Run: v.Run, Task: v.Task, Number: v.Attempt}, err == nil, err
	}
	as, err := f.st.TaskAttempts(ctx, store.FenceResource(f.plan.Pipeline, interval), t.Name)
	var last *store.Attempt
	for i := range as {
		if as[i].State == store.AttemptSucceeded {
			last = &as[i]
		}
	}
	if err != nil || last == nil {
		return store.AttemptRef{}, false, err
	}
	return last.AttemptRef, true, nil
}

// editedSince says which tasks the spec defines otherwise than run did,
// and whose outputs it checks otherwise (Status.Edited; "" when none). It
// does not name the run, so that the intervals a backfill skips alike are
// said in one line.
func (f *Facts) editedSince(run string) string {
	var says []string
	if names := f.edited[run]; len(names) > 0 {
		says = append(says, fmt.Sprintf("the spec defines task %s otherwise than the run that succeeded last", fewNames(names)))
	}
	if names := f.rechecked[run]; len(names) > 0 {
		says = append(says, fmt.Sprintf("a check of the outputs of task %s is new or edited since the run that succeeded last", fewNames(names)))
	}
	return strings.Join(says, "; ")
}

// fewNames joins names, the first three and how many more.
func fewNames(names []string) string {
	if len(names) > 3 {
		names = append(names[:3:3], fmt.Sprintf("%d more", len(names)-3))
	}
	return strings.Join(names, ", ")
}

// submitted reports whether run was handed to workers (queue.Submit): a
// store that serves no workers (q nil) has no such runs.
func submitted(ctx context.Context, q queue.Queue, run string) (bool, error) {
	if q == nil {
		return false, nil
	}
	_, err := q.Submitted(ctx, run)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// State is what an interval's published versions are.
type State string

const (
	// Complete: every publish shows a version of the spec's code_version
	// (for a pipeline without publishes: a run of that code_version
	// succeeded).
	Complete State = "complete"
	// Stale: something is visible, but some publish shows a version of
	// another code_version (or shows nothing while others do).
	Stale State = "stale"
	// Missing: nothing is visible (or, without publishes, no run of the
	// spec's code_version succeeded).
	Missing State = "missing"
)

// Status is one interval as the store shows it.
type Status struct {
	State State
	// Why says it: "complete at code_version 2024.06.1", "daily_totals
	// shows code_version 2024.06.1, the spec's is 2024.07.1".
	Why string
	// Succeeded is the latest succeeded run of the interval ("" if none).
	Succeeded string
	// Running is the run in progress, if any.
	Running *Running
	// Edited, for a complete interval, names the tasks the spec defines
	// otherwise than its latest succeeded run did, and those whose outputs
	// it checks otherwise (read for a backfill's intervals only,
	// readEdits); "" when none.
	Edited string
	// Moved, for a complete interval, says what one of its tasks read of
	// another interval that was rebuilt since with other content (read for
	// a backfill's intervals only, readMoved); "" when nothing.
	Moved string
}

// Status returns what the store shows of the interval.
func (f *Facts) Status(iv runtime.Interval) Status {
	s := Status{Succeeded: f.succeeded[iv.Key]}
	if r, ok := f.running[iv.Key]; ok {
		s.Running = &r
	}
	cv := f.plan.CodeVersion
	if len(f.plan.Publishes) == 0 {
		switch {
		case f.current[iv.Key]:
			s.State, s.Why = Complete, fmt.Sprintf("complete: a run at code_version %s succeeded", orNone(cv))
			s.Edited, s.Moved = f.editedSince(s.Succeeded), f.moved[iv.Key]
		case s.Succeeded != "":
			s.State, s.Why = Stale, fmt.Sprintf("stale: %s succeeded at another code_version than the spec's %s", s.Succeeded, orNone(cv))
		default:
			s.State, s.Why = Missing, "no run of it succeeded"
		}
		return s
	}
	var stale, missing []string
	shown := 0
	for _, p := range f.plan.Publishes {
		v, ok := f.visible[p.Sink+"\x00"+p.Artifact+"\x00"+iv.Key]
		switch {
		case !ok:
			missing = append(missing, p.Name)
		case v.CodeVersion != cv:
			shown++
			stale = append(stale, fmt.Sprintf("%s shows code_version %s (%s)", p.Name, orNone(v.CodeVersion), v.Run))
		default:
			shown++
		}
	}
	switch {
	case len(stale) == 0 && len(missing) == 0:
		s.State, s.Why = Complete, "complete at code_version "+orNone(cv)
		s.Edited, s.Moved = f.editedSince(s.Succeeded), f.moved[iv.Key]
	case shown == 0:
		s.State, s.Why = Missing, "not published"
	case len(stale) > 0:
		s.State, s.Why = Stale, fmt.Sprintf("stale: %s; the spec's is %s", strings.Join(stale, ", "), orNone(cv))
	default:
		s.State, s.Why = Stale, fmt.Sprintf("stale: %s not published", strings.Join(missing, ", "))
	}
	return s
}

// outdated says why a complete interval is out of date although its
// published versions are of the spec's code_version (Edited, Moved); ""
// when it is not.
func (s Status) outdated() string {
	switch {
	case s.Edited != "" && s.Moved != "":
		return s.Edited + "; " + s.Moved
	case s.Edited != "":
		return s.Edited
	}
	return s.Moved
}

// ActiveRuns lists the pipeline's runs in progress, by interval.
func (f *Facts) ActiveRuns() []Running {
	out := make([]Running, 0, len(f.running))
	for _, k := range slices.Sorted(mapKeys(f.running)) {
		out = append(out, f.running[k])
	}
	return out
}

// hasAccepted reports whether artifact has an accepted version for the
// interval (what a task reading it there needs).
func (f *Facts) hasAccepted(ctx context.Context, artifact, interval string) (bool, error) {
	digest, err := f.acceptedDigest(ctx, artifact, interval)
	return digest != "", err
}

// acceptedDigest is the content digest of artifact's accepted version for
// the interval, "" when it has none.
func (f *Facts) acceptedDigest(ctx context.Context, artifact, interval string) (string, error) {
	k := artifact + "\x00" + interval
	if digest, seen := f.accepted[k]; seen || f.st == nil {
		return digest, nil
	}
	v, err := f.st.AcceptedVersion(ctx, f.plan.Pipeline, artifact, interval)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	f.accepted[k] = v.Digest
	return v.Digest, nil
}

func orNone(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
