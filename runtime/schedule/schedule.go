// Package schedule decides which intervals of a pipeline to run: the ones
// due now by its schedule (pipec run --due, pipec submit --due) and the
// ones a backfill rebuilds (pipec backfill, with --stale), from what the
// store says of each interval: whether a run of it succeeded, whether its
// published versions are visible at the spec's code_version, whether a run
// of it is in progress (and whose), and whether the inputs it reads from
// other intervals exist. Run, submit and backfill share it so they cannot
// disagree about what "complete", "stale", "missed" or "blocked" means.
//
// The package decides and executes nothing: the caller runs or submits the
// intervals it returns, in order, at most Slots at a time.
package schedule

import (
	"fmt"
	"math"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime"
)

// MaxIntervals bounds how many intervals one decision enumerates, so a
// schedule of every minute since 1970 is an error, not a hang.
const MaxIntervals = 100000

// Action is what to do with one interval.
type Action string

const (
	// Run: run (or submit) it.
	Run Action = "run"
	// Skip: nothing to do (complete; succeeded, for a due run; not stale).
	Skip Action = "skip"
	// Active: a run of it is in progress; it is left alone.
	Active Action = "active"
	// Blocked: an input it reads from another interval has no accepted
	// version and nothing before it in this batch makes one.
	Blocked Action = "blocked"
)

// Decision is what to do with one interval, and why.
type Decision struct {
	Interval runtime.Interval
	Action   Action
	// Why says it for a person: "complete at code_version 2024.06.1",
	// "a run of it is active: … (host h1, pid 42, since …)".
	Why string
	// Kind is Why without what differs from one interval to the next
	// ("succeeded" for "succeeded in daily/2024-01-01/r1"), so a caller may
	// print a stretch of like intervals as one line.
	Kind string
	// Needs, for an interval to run, lists the earlier decisions (indexes,
	// each an interval to run) whose outputs it reads: when one of them
	// does not succeed, this one is blocked by it.
	Needs []int
}

// Intervals returns the intervals of the plan's schedule whose starts lie
// between first and last, both included; first and last must be interval
// starts (see runtime.ResolveInterval).
func Intervals(first, last runtime.Interval) ([]runtime.Interval, error) {
	if last.Start.Before(first.Start) {
		return nil, fmt.Errorf("%s is before %s", last.Key, first.Key)
	}
	span := last.Start.Sub(first.Start)
	n := span / first.Every
	if n >= MaxIntervals || span == math.MaxInt64 { // Sub saturates ~292 years on
		return nil, fmt.Errorf("more than %d intervals between %s and %s", MaxIntervals, first.Key, last.Key)
	}
	out := make([]runtime.Interval, 0, n+1)
	for i := range int(n) + 1 {
		iv, _ := first.Offset(i)
		out = append(out, iv)
	}
	return out, nil
}

// Slots is how many runs of the plan may go at once by its schedule:
// max_active_runs (one without it), and one when a task reads an earlier
// interval's artifact (each run needs the one before it). Why says which.
func Slots(plan *compiler.Plan) (int, string) {
	n, why := 1, "no max_active_runs: one run at a time"
	if s := plan.Schedule; s != nil && s.MaxActiveRuns > 0 {
		n, why = s.MaxActiveRuns, "schedule max_active_runs"
	}
	for _, t := range plan.Tasks {
		for _, in := range t.Inputs {
			if in.Offset < 0 && n > 1 {
				n = 1
				why = fmt.Sprintf("one run at a time: task %s reads %s@%d, an earlier interval", t.Name, in.Artifact, in.Offset)
			}
		}
	}
	return n, why
}

// Latest is the latest interval of the plan's schedule that is due at now:
// the last one whose end is not after now (an interval is due once it is
// over). ok is false when none is (now is before the end of the first
// interval); first is then the schedule's first interval. A schedule
// without a start counts its intervals from the Unix epoch.
func Latest(plan *compiler.Plan, now time.Time) (latest, first runtime.Interval, ok bool, err error) {
	if plan.Schedule == nil {
		return latest, first, false, fmt.Errorf("pipeline %s has no schedule: nothing is ever due", plan.Pipeline)
	}
	anchor := plan.Schedule.Start
	if anchor == "" {
		anchor = time.Unix(0, 0).UTC().Format(time.RFC3339)
	}
	first, err = runtime.ResolveInterval(plan.Schedule, anchor)
	if err != nil {
		return latest, first, false, err
	}
	now = now.UTC()
	if now.Before(first.End) {
		return latest, first, false, nil
	}
	since := now.Sub(first.Start)
	if since == math.MaxInt64 {
		// Sub saturates about 292 years on: the count would be wrong.
		return latest, first, false, fmt.Errorf("%s is too far after the schedule's first interval %s", now.Format(time.RFC3339), first.Key)
	}
	k := int(since/first.Every) - 1
	latest, _ = first.Offset(k)
	return latest, first, true, nil
}
