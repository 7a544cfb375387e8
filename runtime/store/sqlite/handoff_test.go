package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
)

// TestFinishAndStartEpochSpent: a start of the handoff that would reach
// past the recorded epoch makes the whole write (the end with it) run again
// with a new, durably recorded epoch; the end is recorded once.
func TestFinishAndStartEpochSpent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openTest(t, path, nil)
	ctx := context.Background()
	run, res, a := queuedAttempt(t, s)
	if _, err := rawDB(t, path).Exec(`UPDATE tokens SET last = ? WHERE resource = ?`, 2*store.EpochSpan-1, res); err != nil {
		t.Fatal(err)
	}
	started, err := s.FinishAndStart(ctx, a.AttemptRef, store.Outcome{State: store.AttemptSucceeded,
		Ran: &store.Running{Process: store.Process{PID: 4711, PGID: 4711}}},
		[]store.AttemptSpec{{Run: run.ID, Task: "b", Resource: res, Queued: true}})
	if err != nil || started[0].Err != nil || started[0].Attempt.Token != 2*store.EpochSpan {
		t.Fatalf("FinishAndStart past the epoch = %+v, %v; want token %d", started, err, 2*store.EpochSpan)
	}
	got, err := s.GetAttempt(ctx, a.AttemptRef)
	if err != nil || got.State != store.AttemptSucceeded {
		t.Fatalf("the end: %+v, %v", got, err)
	}
	evs, err := s.Events(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Task == "a" && e.Kind == store.EventAttemptFinished {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d attempt.finished events of a, want 1", n)
	}
}

// TestFinishAndStartEventsInOrder: the events of a handoff, one
// transaction, are the end's then the starts', and their times never go
// back against their sequence numbers, even when the clock steps back at
// each reading.
func TestFinishAndStartEventsInOrder(t *testing.T) {
	now := time.Date(2024, 1, 2, 3, 0, 0, 0, time.UTC)
	s := openTest(t, filepath.Join(t.TempDir(), "state.db"), func() time.Time {
		now = now.Add(-time.Minute) // the clock steps back at each reading
		return now
	})
	ctx := context.Background()
	run, res, a := queuedAttempt(t, s)
	// A day later, still stepping back at each reading: later than the
	// events before, earlier from one of the handoff's events to the next.
	now = now.Add(24 * time.Hour)
	started, err := s.FinishAndStart(ctx, a.AttemptRef, store.Outcome{State: store.AttemptSucceeded, Was: &a,
		Ran: &store.Running{Process: store.Process{PID: 4711, PGID: 4711}}},
		[]store.AttemptSpec{{Run: run.ID, Task: "b", Resource: res, Queued: true}, {Run: run.ID, Task: "c", Resource: res, Queued: true}})
	if err != nil || started[0].Err != nil || started[1].Err != nil {
		t.Fatalf("FinishAndStart = %+v, %v", started, err)
	}
	evs, err := s.Events(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, e := range evs {
		if i > 0 && e.Time.Before(evs[i-1].Time) {
			t.Errorf("event %d (%s) at %s, after event %d at %s", e.Seq, e.Kind, e.Time, evs[i-1].Seq, evs[i-1].Time)
		}
		if e.Task != "" {
			got = append(got, e.Task+" "+e.Kind)
		}
	}
	want := []string{"a " + store.EventAttemptStarted, "a " + store.EventAttemptRunning, "a " + store.EventAttemptFinished,
		"b " + store.EventAttemptStarted, "c " + store.EventAttemptStarted}
	if len(got) != len(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %q, want %q", got, want)
		}
	}
}

// queuedAttempt is a new run of s, its fencing resource, and the queued
// attempt of its task a that a handoff then ends.
func queuedAttempt(t *testing.T, s *Store) (store.Run, string, store.Attempt) {
	t.Helper()
	run := newRun(t, s, "2024-01-01")
	res := store.FenceResource("orders", "2024-01-01")
	a, err := s.StartAttempt(context.Background(), store.AttemptSpec{Run: run.ID, Task: "a", Resource: res, Queued: true})
	if err != nil {
		t.Fatal(err)
	}
	return run, res, a
}
