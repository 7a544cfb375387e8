package schedule

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/pipec/pipec/runtime"
)

// Rebuild is which intervals a backfill runs.
type Rebuild int

const (
	// RebuildGaps: the intervals not complete.
	RebuildGaps Rebuild = iota
	// RebuildStale: the intervals whose published versions are of another
	// code_version, or whose latest succeeded run defined a task
	// otherwise (pipec backfill --stale).
	RebuildStale
	// RebuildAll: every interval, complete or not (pipec backfill --force, whose
	// runs reuse nothing).
	RebuildAll
)

// Backfill decides each of ivs (in order) for a backfill. An interval that
// is complete is skipped; with RebuildStale, so is every interval that is not
// stale (only published versions of another code_version are rebuilt),
// and a complete interval whose latest succeeded run defined a task
// otherwise (Status.Edited) is rebuilt: only with RebuildStale, so that a plain
// backfill after an edit fills gaps and says how to rebuild the rest.
// With RebuildAll every interval runs. Whatever the mode, an interval being run
// is left alone (Active), one whose earlier-interval input cannot exist is
// Blocked.
func (f *Facts) Backfill(ctx context.Context, ivs []runtime.Interval, mode Rebuild) ([]Decision, error) {
	stale := mode == RebuildStale
	if mode == RebuildAll {
		return f.decide(ctx, ivs, func(s Status) (bool, string) { return true, "forced: " + s.Why }, false)
	}
	if err := f.readEdits(ctx, ivs); err != nil {
		return nil, err
	}
	if err := f.readMoved(ctx, ivs); err != nil {
		return nil, err
	}
	ds, err := f.decide(ctx, ivs, func(s Status) (bool, string) {
		switch {
		case s.State == Complete && s.outdated() != "" && stale:
			return true, "stale: " + s.outdated()
		case s.State == Complete && s.outdated() != "":
			return false, s.Why + ", but " + s.outdated() + " (--stale rebuilds it)"
		case s.State == Complete:
			return false, s.Why
		case stale && s.State != Stale:
			return false, "not stale: " + s.Why
		}
		return true, s.Why
	}, stale)
	return ds, err
}

// Due is what is due at a moment.
type Due struct {
	// Now is the moment.
	Now time.Time
	// Latest is the latest due interval; Any is false when no interval is
	// due yet, and First, the schedule's first interval, says when one
	// will be (at First.End).
	Latest, First runtime.Interval
	Any           bool
	// Catchup is the schedule's catchup.
	Catchup bool
	// Decisions: the latest interval alone without catch-up; with it, every
	// due interval from the schedule's start (without a start: those after
	// the latest one that succeeded), oldest first. An interval that has a
	// succeeded run is skipped: "missed" means due and never succeeded.
	Decisions []Decision
}

// Due decides what is due at now.
func (f *Facts) Due(ctx context.Context, now time.Time) (Due, error) {
	latest, first, ok, err := Latest(f.plan, now)
	d := Due{Now: now.UTC(), Latest: latest, First: first, Any: ok, Catchup: f.plan.Schedule != nil && f.plan.Schedule.Catchup}
	if err != nil || !ok {
		return d, err
	}
	cands := []runtime.Interval{latest}
	if d.Catchup {
		from := first
		if f.plan.Schedule.Start == "" {
			// Without a start, catch-up begins after the latest interval
			// that succeeded; with none, only the latest is due.
			from = latest
			var last *runtime.Interval
			for key := range f.succeeded {
				iv, err := runtime.ResolveInterval(f.plan.Schedule, key)
				if err != nil || iv.Start.After(latest.Start) {
					continue
				}
				if last == nil || iv.Start.After(last.Start) {
					last = &iv
				}
			}
			if last != nil {
				from, _ = last.Offset(1)
			}
			if from.Start.After(latest.Start) {
				from = latest
			}
		}
		if cands, err = Intervals(from, latest); err != nil {
			return d, fmt.Errorf("catch-up: %w", err)
		}
	}
	d.Decisions, err = f.decide(ctx, cands, func(s Status) (bool, string) {
		if s.Succeeded != "" {
			return false, "succeeded in " + s.Succeeded
		}
		return true, "due, no run of it succeeded"
	}, false)
	return d, err
}

// decide turns candidate intervals into decisions: want says whether an
// interval needs a run (and why not); one that does is Active when a run
// of it is in progress, Blocked when an input it reads from an earlier
// interval has no accepted version and no earlier decision runs that
// interval, else Run. With follow, a complete interval want skips runs
// too when it reads an earlier interval that a decision before it runs
// (readsRebuilt): what it read may change.
func (f *Facts) decide(ctx context.Context, ivs []runtime.Interval, want func(Status) (bool, string), follow bool) ([]Decision, error) {
	if f.plan.Schedule == nil {
		return nil, fmt.Errorf("pipeline %s has no schedule", f.plan.Pipeline)
	}
	out := make([]Decision, 0, len(ivs))
	at := make(map[string]int, len(ivs))
	for _, iv := range ivs {
		s := f.Status(iv)
		d := Decision{Interval: iv, Action: Run}
		run, why := want(s)
		if !run && follow && s.State == Complete {
			if rebuilt := f.readsRebuilt(iv, out, at); rebuilt != "" {
				run, why = true, "stale: "+rebuilt
			}
		}
		d.Why, d.Kind = why, why
		switch {
		case !run:
			d.Action = Skip
			if s.Succeeded != "" && why == "succeeded in "+s.Succeeded {
				d.Kind = "succeeded"
			}
		case s.Running != nil:
			d.Action, d.Why, d.Kind = Active, "a run of it is active: "+s.Running.String(), "active"
		default:
			blocked, needs, err := f.inputsBlocked(ctx, iv, out, at)
			if err != nil {
				return nil, err
			}
			if blocked != "" {
				d.Action, d.Why, d.Kind = Blocked, blocked, "blocked"
			}
			d.Needs = needs
		}
		at[iv.Key] = len(out)
		out = append(out, d)
	}
	return out, nil
}

// readsRebuilt says which input of an earlier interval iv reads that a
// decision before it (prior, at) runs; "" when none.
func (f *Facts) readsRebuilt(iv runtime.Interval, prior []Decision, at map[string]int) string {
	for _, t := range f.plan.Tasks {
		for _, in := range t.Inputs {
			if in.Offset >= 0 {
				continue
			}
			j, exists := iv.Offset(in.Offset)
			if k, inBatch := at[j.Key]; exists && inBatch && prior[k].Action == Run {
				return fmt.Sprintf("task %s reads %s of %s, which this backfill rebuilds first", t.Name, in.Artifact, j.Key)
			}
		}
	}
	return ""
}

// inputsBlocked checks the inputs the plan's tasks read from earlier
// intervals: each must be produced by an earlier decision to run, or have
// an accepted version already, or lie before the schedule's start (the
// task then runs without it, as the runtime does). It returns the first
// reason it is blocked and the decisions it needs.
func (f *Facts) inputsBlocked(ctx context.Context, iv runtime.Interval, prior []Decision, at map[string]int) (string, []int, error) {
	var needs []int
	for _, t := range f.plan.Tasks {
		for _, in := range t.Inputs {
			if in.Offset >= 0 {
				continue
			}
			j, exists := iv.Offset(in.Offset)
			if !exists {
				continue
			}
			k, inBatch := at[j.Key]
			if inBatch && prior[k].Action == Run {
				if !slices.Contains(needs, k) {
					needs = append(needs, k)
				}
				continue
			}
			ok, err := f.hasAccepted(ctx, in.Artifact, j.Key)
			if err != nil {
				return "", nil, err
			}
			if ok {
				continue
			}
			what := fmt.Sprintf("input %s@%d of task %s: interval %s", in.Artifact, in.Offset, t.Name, j.Key)
			switch {
			case inBatch && prior[k].Action == Blocked:
				return what + " is blocked too", nil, nil
			case f.running[j.Key].Run != "":
				return fmt.Sprintf("%s has no accepted version yet: a run of it is active: %s", what, f.running[j.Key]), nil, nil
			}
			return what + " has no accepted version (not complete, and not in this batch)", nil, nil
		}
	}
	slices.Sort(needs)
	return "", needs, nil
}
