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
