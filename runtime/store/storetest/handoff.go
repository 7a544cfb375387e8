package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
)

// testFinishAndStart: an attempt's end with the starts it lets start
// (store.FinishAndStart: the backend's store.Handoff, or one write each)
// records the end and queues the attempts with higher tokens, the end's
// event first; a refused end starts nothing; a refused start (its run is
// over) leaves out only itself.
func testFinishAndStart(t *testing.T, open single) {
	ctx := context.Background()
	s := open(t, nil)
	run := newRun(t, s, "2024-01-01")
	a, err := s.StartAttempt(ctx, queuedSpec(run.ID, "a"))
	if err != nil {
		t.Fatal(err)
	}
	ran := &store.Running{Process: store.Process{Host: "h1", Boot: "b1", PID: 4711, PGID: 4711, Start: 1}, Lease: time.Minute}
	ok := store.Outcome{State: store.AttemptSucceeded, Ran: ran}
	started, err := store.FinishAndStart(ctx, s, a.AttemptRef, ok, []store.AttemptSpec{queuedSpec(run.ID, "b"), queuedSpec(run.ID, "c")})
	if err != nil || len(started) != 2 {
		t.Fatalf("FinishAndStart = %+v, %v", started, err)
	}
	if got, err := s.GetAttempt(ctx, a.AttemptRef); err != nil || got.State != store.AttemptSucceeded || got.PID != 4711 {
		t.Fatalf("the end: %+v, %v", got, err)
	}
	for i, task := range []string{"b", "c"} {
		st := started[i]
		if st.Err != nil || st.Attempt.Task != task || st.Attempt.Number != 1 || st.Attempt.State != store.AttemptQueued ||
			st.Attempt.Token <= a.Token {
			t.Fatalf("start of %s = %+v", task, st)
		}
		if got, err := s.GetAttempt(ctx, st.Attempt.AttemptRef); err != nil || got.Token != st.Attempt.Token {
			t.Fatalf("started %s: %+v, %v", task, got, err)
		}
	}
	evs, err := s.Events(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	finished, bStarted := -1, -1
	for i, e := range evs {
		switch {
		case e.Task == "a" && e.Kind == store.EventAttemptFinished:
			finished = i
		case e.Task == "b" && e.Kind == store.EventAttemptStarted:
			bStarted = i
		}
	}
	if finished < 0 || bStarted < finished {
		t.Fatalf("a finished at event %d, b started at %d: the end comes first", finished, bStarted)
	}

	// A refused end (b is queued: finishing it twice differently) starts nothing.
	b := started[0].Attempt
	if err := s.FinishAttempt(ctx, b.AttemptRef, store.Outcome{State: store.AttemptFailed, Class: "exit", ExitCode: 1, ErrorTail: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.FinishAndStart(ctx, s, b.AttemptRef, ok, []store.AttemptSpec{queuedSpec(run.ID, "d")}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a refused end: %v", err)
	}
	if as, err := s.TaskAttempts(ctx, store.FenceResource("orders", "2024-01-01"), "d"); err != nil || len(as) != 0 {
		t.Fatalf("attempts of d after a refused end: %+v, %v", as, err)
	}

	// A refused start leaves out only itself.
	over := newRun(t, s, "2024-01-02")
	if err := s.FinishRun(ctx, over.ID, store.RunFailed); err != nil {
		t.Fatal(err)
	}
	c := started[1].Attempt
	started, err = store.FinishAndStart(ctx, s, c.AttemptRef, ok, []store.AttemptSpec{queuedSpec(over.ID, "e"), queuedSpec(run.ID, "f")})
	if err != nil || len(started) != 2 {
		t.Fatalf("FinishAndStart = %+v, %v", started, err)
	}
	if !errors.Is(started[0].Err, store.ErrConflict) || started[1].Err != nil || started[1].Attempt.Task != "f" {
		t.Fatalf("a refused start beside a good one: %+v", started)
	}
	if got, err := s.GetAttempt(ctx, c.AttemptRef); err != nil || got.State != store.AttemptSucceeded {
		t.Fatalf("the end beside a refused start: %+v, %v", got, err)
	}
	if as, err := s.Attempts(ctx, over.ID); err != nil || len(as) != 0 {
		t.Fatalf("attempts of the run that is over: %+v, %v", as, err)
	}
}
