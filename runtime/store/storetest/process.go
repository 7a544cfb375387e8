package storetest

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
)

// testProcessRecorded: the whole process identity is recorded and read back;
// a launch intent (pid 0, durable) moves a queued attempt to running before
// its process exists.
func testProcessRecorded(t *testing.T, open single) {
	ctx := context.Background()
	s := open(t, nil)
	run := newRun(t, s, "2024-01-01")
	a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: "charge", Resource: store.FenceResource("orders", "2024-01-01"),
		Host: "h1", Boot: "b1", Queued: true})
	if err != nil || a.Host != "h1" || a.Boot != "b1" || a.State != store.AttemptQueued {
		t.Fatalf("StartAttempt = %+v, %v", a, err)
	}
	got, err := s.MarkRunningAs(ctx, a.AttemptRef, store.Running{Process: store.Process{Host: "h1", Boot: "b1"}, Lease: time.Minute,
		Durable: true})
	if err != nil || got.State != store.AttemptRunning || got.PID != 0 {
		t.Fatalf("launch intent = %+v, %v", got, err)
	}
	want := store.Process{Host: "h1", Boot: "b1", PID: 4711, PGID: 4711, Start: 123456789}
	if _, err := s.MarkRunningAs(ctx, a.AttemptRef, store.Running{Process: want, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetAttempt(ctx, a.AttemptRef)
	if err != nil || got.Process() != want || got.State != store.AttemptRunning {
		t.Fatalf("attempt = %+v (process %+v), %v", got, got.Process(), err)
	}
}

// testResolveAttempt: only an unknown attempt can be resolved, once; the
// decision is recorded with who and why.
func testResolveAttempt(t *testing.T, open single) {
	ctx := context.Background()
	s := open(t, nil)
	run := newRun(t, s, "2024-01-01")
	a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: "charge", Resource: store.FenceResource("orders", "2024-01-01")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResolveAttempt(ctx, a.AttemptRef, store.AttemptSucceeded, "why", "me@here"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("resolving a running attempt: %v", err)
	}
	if _, err := s.AbandonRun(ctx, run.ID, "its pipec died"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResolveAttempt(ctx, a.AttemptRef, store.AttemptUnknown, "why", "me@here"); err == nil {
		t.Fatal("resolved as unknown")
	}
	got, err := s.ResolveAttempt(ctx, a.AttemptRef, store.AttemptSucceeded, "the ledger has it", "me@here")
	if err != nil || got.State != store.AttemptSucceeded || got.Class != store.ClassResolved || got.ErrorTail != "the ledger has it" {
		t.Fatalf("ResolveAttempt = %+v, %v", got, err)
	}
	if _, err := s.ResolveAttempt(ctx, a.AttemptRef, store.AttemptFailed, "changed my mind", "me@here"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("resolving twice: %v", err)
	}
	evs, err := s.Events(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	want := `{"as":"succeeded","by":"me@here","reason":"the ledger has it","token":` + strconv.FormatInt(a.Token, 10) + `}`
	if last.Kind != store.EventAttemptResolved || string(last.Payload) != want {
		t.Errorf("last event = %s %s", last.Kind, last.Payload)
	}
}

// testFinishRecordsProcess: an attempt whose process ended before its start
// was recorded finishes in one write that records both (Outcome.Ran): the
// row and the events are those of MarkRunningAs then FinishAttempt, and
// repeating the write changes nothing.
func testFinishRecordsProcess(t *testing.T, open single) {
	ctx := context.Background()
	s := open(t, nil)
	run := newRun(t, s, "2024-01-01")
	a, err := s.StartAttempt(ctx, queuedSpec(run.ID, "t"))
	if err != nil {
		t.Fatal(err)
	}
	want := store.Process{Host: "h1", Boot: "b1", PID: 4711, PGID: 4711, Start: 123456789}
	o := store.Outcome{State: store.AttemptFailed, Class: "exit", ExitCode: 3, ErrorTail: "boom",
		Ran: &store.Running{Process: want, Lease: time.Minute}}
	if err := s.FinishAttempt(ctx, a.AttemptRef, o); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetAttempt(ctx, a.AttemptRef)
	if err != nil || got.State != store.AttemptFailed || got.Process() != want || got.ExitCode != 3 || got.Started.IsZero() ||
		got.Ended.IsZero() || !got.LeaseExpiry.IsZero() {
		t.Fatalf("attempt = %+v (process %+v), %v", got, got.Process(), err)
	}
	if err := s.FinishAttempt(ctx, a.AttemptRef, o); err != nil {
		t.Fatalf("the same outcome again: %v", err)
	}
	kinds := taskEventKinds(t, s, run.ID, "t")
	wantKinds := []string{store.EventAttemptStarted, store.EventAttemptRunning, store.EventAttemptFinished}
	if len(kinds) != len(wantKinds) {
		t.Fatalf("events of the attempt = %v, want %v", kinds, wantKinds)
	}
	for i := range kinds {
		if kinds[i] != wantKinds[i] {
			t.Fatalf("events of the attempt = %v, want %v", kinds, wantKinds)
		}
	}
	// A finished attempt is never marked running again, with or without Ran.
	if err := s.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptSucceeded, Ran: o.Ran}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("another outcome: %v", err)
	}
}
