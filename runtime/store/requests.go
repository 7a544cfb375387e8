package store

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// The checks every store makes of a request before it touches its tables,
// written here once so that both stores refuse the same requests with the
// same words.

// Check refuses a run without its pipeline or its interval, or whose
// interval a store cannot record (CheckInterval).
func (nr NewRun) Check() error {
	if nr.Pipeline == "" || nr.Interval == "" {
		return errors.New("create run: pipeline and interval are required")
	}
	if err := CheckInterval(nr.Interval, nr.IntervalStart, nr.IntervalEnd); err != nil {
		return fmt.Errorf("create run: %w", err)
	}
	return nil
}

// CheckInterval refuses an interval that starts or ends outside the times
// every store records: nanoseconds since 1970 in 64 bits, as the SQLite
// store keeps them (from 1677-09-21 to 2262-04-11). Beyond them its times
// would wrap around, and the run read back with another interval. key
// names the interval in the message; a zero time is not checked.
func CheckInterval(key string, start, end time.Time) error {
	earliest, latest := time.Unix(0, math.MinInt64).UTC(), time.Unix(0, math.MaxInt64).UTC()
	for _, t := range []time.Time{start, end} {
		if !t.IsZero() && (t.Before(earliest) || t.After(latest)) {
			return fmt.Errorf("interval %s (%s to %s) is not between %s and %s, the times a state records",
				key, start.Format(time.RFC3339), end.Format(time.RFC3339), earliest.Format(time.RFC3339), latest.Format(time.RFC3339))
		}
	}
	return nil
}

// Check refuses an attempt without its run or its task.
func (spec AttemptSpec) Check() error {
	if spec.Run == "" || spec.Task == "" {
		return errors.New("start attempt: run and task are required")
	}
	return nil
}

// CheckRecord refuses to record a version that does not name what produced
// it (its artifact, interval, run, task and attempt) or whose digest is not
// sha256:<hex>.
func (v Version) CheckRecord() error {
	if v.Artifact == "" || v.Interval == "" || v.Run == "" || v.Task == "" || v.Attempt <= 0 {
		return errors.New("record version: artifact, interval, run, task and attempt are required")
	}
	if !strings.HasPrefix(v.Digest, "sha256:") {
		return fmt.Errorf("record version: digest %q is not sha256:<hex>", v.Digest)
	}
	return nil
}

// Check refuses a swap that does not name its pointer whole.
func (sw Swap) Check() error {
	if sw.Pipeline == "" || sw.Sink == "" || sw.Artifact == "" || sw.Interval == "" {
		return errors.New("compare-and-swap: pipeline, sink, artifact and interval are required")
	}
	return nil
}

// Reopening decides ReopenVersion for v, as every store does: a rejected
// version is reopened (reopen), with the event that says so (ev, for
// reason); a staged one is left as it is; an accepted one is refused.
func (v Version) Reopening(reason string) (reopen bool, ev Event, payload map[string]any, err error) {
	switch v.State {
	case VersionStaged:
		return false, Event{}, nil, nil
	case VersionAccepted:
		return false, Event{}, nil, fmt.Errorf("version %s is accepted, cannot be audited again: %w", v.Label(), ErrConflict)
	}
	return true, Event{Run: v.Run, Kind: EventVersionReopened, Task: v.Task, Attempt: v.Attempt},
		map[string]any{"version": v.ID, "label": v.Label(), "token": v.Token, "reason": reason}, nil
}
