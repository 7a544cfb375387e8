package store

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func openTemp(t *testing.T) *SQLite {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The whole process identity is recorded and read back; a launch intent
// (pid 0, durable) moves a queued attempt to running before its process
// exists.
func TestMarkRunningAsRecordsTheProcess(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	run, err := s.CreateRun(ctx, NewRun{Pipeline: "p", Interval: "2024-01-01"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.StartAttempt(ctx, AttemptSpec{Run: run.ID, Task: "charge", Resource: FenceResource("p", "2024-01-01"),
		Host: "h1", Boot: "b1", Queued: true})
	if err != nil || a.Host != "h1" || a.Boot != "b1" || a.State != AttemptQueued {
		t.Fatalf("StartAttempt = %+v, %v", a, err)
	}
	got, err := s.MarkRunningAs(ctx, a.AttemptRef, Running{Process: Process{Host: "h1", Boot: "b1"}, Lease: time.Minute, Durable: true})
	if err != nil || got.State != AttemptRunning || got.PID != 0 {
		t.Fatalf("launch intent = %+v, %v", got, err)
	}
	want := Process{Host: "h1", Boot: "b1", PID: 4711, PGID: 4711, Start: 123456789}
	if _, err := s.MarkRunningAs(ctx, a.AttemptRef, Running{Process: want, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetAttempt(ctx, a.AttemptRef)
	if err != nil || got.Process() != want || got.State != AttemptRunning {
		t.Fatalf("attempt = %+v (process %+v), %v", got, got.Process(), err)
	}
}

// Only an unknown attempt can be resolved, once; the decision is recorded
// with who and why.
func TestResolveAttempt(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	run, err := s.CreateRun(ctx, NewRun{Pipeline: "p", Interval: "2024-01-01"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.StartAttempt(ctx, AttemptSpec{Run: run.ID, Task: "charge", Resource: FenceResource("p", "2024-01-01")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResolveAttempt(ctx, a.AttemptRef, AttemptSucceeded, "why", "me@here"); !errors.Is(err, ErrConflict) {
		t.Fatalf("resolving a running attempt: %v", err)
	}
	if _, err := s.AbandonRun(ctx, run.ID, "its pipec died"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResolveAttempt(ctx, a.AttemptRef, AttemptUnknown, "why", "me@here"); err == nil {
		t.Fatal("resolved as unknown")
	}
	got, err := s.ResolveAttempt(ctx, a.AttemptRef, AttemptSucceeded, "the ledger has it", "me@here")
	if err != nil || got.State != AttemptSucceeded || got.Class != ClassResolved || got.ErrorTail != "the ledger has it" {
		t.Fatalf("ResolveAttempt = %+v, %v", got, err)
	}
	if _, err := s.ResolveAttempt(ctx, a.AttemptRef, AttemptFailed, "changed my mind", "me@here"); !errors.Is(err, ErrConflict) {
		t.Fatalf("resolving twice: %v", err)
	}
	evs, err := s.Events(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if last.Kind != EventAttemptResolved || string(last.Payload) != `{"as":"succeeded","by":"me@here","reason":"the ledger has it","token":`+
		itoa(a.Token)+`}` {
		t.Errorf("last event = %s %s", last.Kind, last.Payload)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
