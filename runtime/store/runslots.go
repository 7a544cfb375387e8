package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrNoRunSlot: the pipeline already has its max_active_runs runs in
// progress (see RunSlotsError for which).
var ErrNoRunSlot = errors.New("no free run slot")

// RunSlotsError is CreateRun's (and Submit's) refusal of a run beyond
// NewRun.MaxActive. errors.Is(err, ErrNoRunSlot) holds. A caller waits for
// a slot (pipec run --wait, pipec submit --wait) or leaves the interval for
// later (--due, backfills), and tries again when one of the runs ends.
type RunSlotsError struct {
	Pipeline string
	Max      int
	// InProgress are the runs that hold the slots, ordered by run id.
	InProgress []RunInProgress
}

// RunInProgress is a run that holds one of its pipeline's run slots.
type RunInProgress struct {
	Run      string
	Interval string
	// Owner and Since are those of its live lease on its interval; a run
	// handed to workers holds none (Submitted).
	Owner     RunOwner
	Since     time.Time
	Submitted bool
}

// String names the run and who runs it.
func (r RunInProgress) String() string { return r.Run + " " + r.by() }

// by says who runs it, in parentheses.
func (r RunInProgress) by() string {
	if r.Submitted {
		return "(submitted to the workers)"
	}
	return fmt.Sprintf("(host %s, pid %d, since %s)", r.Owner.Host, r.Owner.PID, r.Since.UTC().Format(time.RFC3339))
}

func (e *RunSlotsError) Error() string { return "no free run slot: " + e.Detail() }

// Detail is the error without its "no free run slot: " prefix, for a
// caller that says it differently ("waiting for a free run slot: …").
func (e *RunSlotsError) Detail() string {
	names := make([]string, len(e.InProgress))
	for i, r := range e.InProgress {
		names[i] = r.String()
	}
	return fmt.Sprintf("%d of %d runs of %s are in progress (max_active_runs): %s",
		len(e.InProgress), e.Max, e.Pipeline, strings.Join(names, ", "))
}

// Is makes errors.Is(err, ErrNoRunSlot) true.
func (e *RunSlotsError) Is(target error) bool { return target == ErrNoRunSlot }

// RunningRun is one running run of a pipeline as a store reads it for
// CheckRunSlots: its lease on its interval (Leased; Live as the store's
// clock judges it, exactly as for RunBusyError) and whether it was handed
// to workers.
type RunningRun struct {
	RunInProgress
	Leased, Live bool
}

// CheckRunSlots is the decision CreateRun takes, inside its transaction,
// on every store: nil when nr may be created beside the pipeline's running
// runs, else a *RunSlotsError. A running run is in progress, and holds a
// slot, when it holds a live lease on its interval (a pipec run, a
// backfill or a --due elsewhere) or holds none and was handed to workers
// (it goes on without its submitter): what runtime/schedule counts as in
// progress. A run whose lease expired is a pipec that died, and nr.TakeOver
// is one whose owner the caller knows is gone: neither holds a slot. The
// store must serialize the creations of a pipeline's runs around this
// call (SQLite: its write lock; PostgreSQL: a lock on the pipeline), so
// two creators never both take the last slot.
//
// It also keeps one run per interval for runs handed to workers: those hold
// no lease on their interval, so a run of an interval with a submitted run
// still running is refused with a *RunBusyError, as beside a live lease.
func CheckRunSlots(nr NewRun, running []RunningRun) error {
	for _, r := range running {
		if r.Interval == nr.Interval && !r.Leased && r.Submitted && r.Run != nr.TakeOver {
			return &RunBusyError{Run: r.Run, Submitted: true}
		}
	}
	if nr.MaxActive <= 0 {
		return nil
	}
	var held []RunInProgress
	for _, r := range running {
		switch {
		case r.Run == nr.TakeOver && nr.TakeOver != "":
		case r.Leased && r.Live, !r.Leased && r.Submitted:
			held = append(held, r.RunInProgress)
		}
	}
	if len(held) < nr.MaxActive {
		return nil
	}
	slices.SortFunc(held, func(a, b RunInProgress) int { return strings.Compare(a.Run, b.Run) })
	return &RunSlotsError{Pipeline: nr.Pipeline, Max: nr.MaxActive, InProgress: held}
}
