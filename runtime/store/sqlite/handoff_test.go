package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/pipec/pipec/runtime/store"
)

// TestFinishAndStartEpochSpent: a start of the handoff that would reach
// past the recorded epoch makes the whole write (the end with it) run again
// with a new, durably recorded epoch; the end is recorded once.
func TestFinishAndStartEpochSpent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openTest(t, path, nil)
	ctx := context.Background()
	run := newRun(t, s, "2024-01-01")
	res := store.FenceResource("orders", "2024-01-01")
	a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: "a", Resource: res, Queued: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rawDB(t, path).Exec(`UPDATE tokens SET last = ? WHERE resource = ?`, 2*epochSpan-1, res); err != nil {
		t.Fatal(err)
	}
	started, err := s.FinishAndStart(ctx, a.AttemptRef, store.Outcome{State: store.AttemptSucceeded,
		Ran: &store.Running{Process: store.Process{PID: 4711, PGID: 4711}}},
		[]store.AttemptSpec{{Run: run.ID, Task: "b", Resource: res, Queued: true}})
	if err != nil || started[0].Err != nil || started[0].Attempt.Token != 2*epochSpan {
		t.Fatalf("FinishAndStart past the epoch = %+v, %v; want token %d", started, err, 2*epochSpan)
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
