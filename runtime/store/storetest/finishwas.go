package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pipec/pipec/runtime/store"
)

// testFinishAssumingWas: an end written with the attempt as its caller
// last wrote it (store.Outcome.Was) leaves the store exactly as the same
// end without it, whether the guess holds or another write changed the
// attempt since: its row, its events and FinishAttempt's answer.
func testFinishAssumingWas(t *testing.T, open single) {
	ran := &store.Running{Process: store.Process{Host: "h1", Boot: "b1", PID: 4711, PGID: 4711, Start: 42}, Lease: time.Minute}
	reads := []store.Read{{Artifact: "raw", Interval: "2023-12-31", Version: 7, Digest: "sha256:ab"}}
	succeeded := store.Outcome{State: store.AttemptSucceeded, Ran: ran, Reads: reads}
	// Each case starts a queued attempt a, writes what came before the end
	// (the caller's own writes, or another's), and returns the end and
	// the attempt the caller believes in.
	cases := []struct {
		name   string
		before func(ctx context.Context, s store.Store, a store.Attempt) (store.Outcome, store.Attempt, error)
	}{
		{"queued, as started", func(_ context.Context, _ store.Store, a store.Attempt) (store.Outcome, store.Attempt, error) {
			return succeeded, a, nil
		}},
		{"running, as marked", func(ctx context.Context, s store.Store, a store.Attempt) (store.Outcome, store.Attempt, error) {
			m, err := s.MarkRunningAs(ctx, a.AttemptRef, *ran)
			return store.Outcome{State: store.AttemptFailed, Class: "exit", ExitCode: 2, ErrorTail: "boom"}, m, err
		}},
		{"marked running by another write", func(ctx context.Context, s store.Store, a store.Attempt) (store.Outcome, store.Attempt, error) {
			_, err := s.MarkRunningAs(ctx, a.AttemptRef, *ran)
			return succeeded, a, err
		}},
		{"ended by another write", func(ctx context.Context, s store.Store, a store.Attempt) (store.Outcome, store.Attempt, error) {
			err := s.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptUnknown, Class: "lost"})
			return succeeded, a, err
		}},
		{"the same end again", func(ctx context.Context, s store.Store, a store.Attempt) (store.Outcome, store.Attempt, error) {
			err := s.FinishAttempt(ctx, a.AttemptRef, succeeded)
			return succeeded, a, err
		}},
		{"another token", func(_ context.Context, _ store.Store, a store.Attempt) (store.Outcome, store.Attempt, error) {
			a.Token++
			return succeeded, a, nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			end := func(assume bool) string {
				s := open(t, nil)
				run := newRun(t, s, "2024-01-01")
				a, err := s.StartAttempt(ctx, queuedSpec(run.ID, "t"))
				if err != nil {
					t.Fatal(err)
				}
				o, was, err := c.before(ctx, s, a)
				if err != nil {
					t.Fatal(err)
				}
				if assume {
					o.Was = &was
				}
				ferr := s.FinishAttempt(ctx, a.AttemptRef, o)
				got, err := s.GetAttempt(ctx, a.AttemptRef)
				if err != nil {
					t.Fatal(err)
				}
				evs, err := s.Events(ctx, run.ID)
				if err != nil {
					t.Fatal(err)
				}
				out := fmt.Sprintf("FinishAttempt: conflict %v, error %v\nattempt: %s %s %d %q %+v started %v ended %v reads %+v\n",
					errors.Is(ferr, store.ErrConflict), ferr != nil, got.State, got.Class, got.ExitCode, got.ErrorTail,
					got.Process(), !got.Started.IsZero(), !got.Ended.IsZero(), got.Reads)
				for _, e := range evs {
					if e.Task == "t" {
						out += e.Kind + " " + string(e.Payload) + "\n"
					}
				}
				return out
			}
			read := end(false)
			if diff := cmp.Diff(read, end(true)); diff != "" {
				t.Errorf("the end assuming the attempt differs from the end read (-read +assumed):\n%s", diff)
			}
			if c.name == "queued, as started" && !strings.Contains(read, fmt.Sprintf("reads %+v", reads)) {
				t.Errorf("the end did not record what the attempt read (store.Outcome.Reads):\n%s", read)
			}
		})
	}
}

// testFinishAfterLostStart: a crash of the state took back the record of
// an attempt's start (MarkRunningAs, an asynchronous commit) but not the
// attempt: the end written as its caller left it (Was: running under the
// attempt's token) records the process again with the end, as an end with
// Ran does, where it was refused as the end of a queued attempt. Under
// another token it is another attempt's, refused as before.
func testFinishAfterLostStart(t *testing.T, open single) {
	s := open(t, nil)
	ctx := context.Background()
	run := newRun(t, s, "2024-01-01")
	lostStart := func(task string) (store.Attempt, store.Attempt) {
		a, err := s.StartAttempt(ctx, queuedSpec(run.ID, task))
		if err != nil {
			t.Fatal(err)
		}
		was := a
		was.State, was.Host, was.Boot, was.PID, was.PGID, was.ProcStart = store.AttemptRunning, "h1", "b1", 4711, 4711, 42
		return a, was
	}
	a, was := lostStart("t")
	if err := s.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptSucceeded, Was: &was}); err != nil {
		t.Fatalf("the end of an attempt whose start the state lost: %v", err)
	}
	got, err := s.GetAttempt(ctx, a.AttemptRef)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.AttemptSucceeded || got.Process() != was.Process() || got.Started.IsZero() || got.Ended.IsZero() {
		t.Errorf("attempt after its end = %+v, want succeeded, its process %+v, started and ended", got, was.Process())
	}
	kinds := taskEventKinds(t, s, run.ID, "t")
	if want := []string{store.EventAttemptRunning, store.EventAttemptFinished}; len(kinds) < 2 || !cmp.Equal(kinds[len(kinds)-2:], want) {
		t.Errorf("events of t = %v, want them to end with %v", kinds, want)
	}
	b, wasB := lostStart("u")
	wasB.Token++
	if err := s.FinishAttempt(ctx, b.AttemptRef, store.Outcome{State: store.AttemptSucceeded, Was: &wasB}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("an end assuming another token: %v, want store.ErrConflict", err)
	}
}

// taskEventKinds is the kinds of the events of one task of a run, in order.
func taskEventKinds(t *testing.T, s store.Store, run, task string) []string {
	t.Helper()
	evs, err := s.Events(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		if e.Task == task {
			kinds = append(kinds, e.Kind)
		}
	}
	return kinds
}
