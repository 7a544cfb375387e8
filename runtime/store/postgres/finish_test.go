package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/postgres"
)

// submitted submits a run of two tasks, a -> b, registers worker w1 and has
// it claim a and start its attempt (queued, as a visit starts one).
func submitted(t *testing.T, s *postgres.Store) (queue.Ref, store.Attempt) {
	t.Helper()
	ctx := context.Background()
	run, err := s.Submit(ctx, queue.Submission{
		Run:  store.NewRun{Pipeline: "p", Interval: "2024-01-01", CodeVersion: "1"},
		Plan: []byte(`{}`), BaseDir: "/spec", Interval: "2024-01-01",
		Tasks: []queue.Task{{Name: "a"}, {Name: "b", Needs: []string{"a"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Register(ctx, queue.WorkerInfo{Name: "w1", Host: "h", PID: 1, Slots: 1}, time.Minute); err != nil {
		t.Fatal(err)
	}
	cl, err := s.Claim(ctx, "w1", time.Minute)
	if err != nil || cl == nil || cl.Task != "a" {
		t.Fatalf("claim: %+v, %v", cl, err)
	}
	a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: "a", Resource: "p@2024-01-01", Worker: "w1", Queued: true})
	if err != nil {
		t.Fatal(err)
	}
	return cl.Ref, a
}

func workState(t *testing.T, s *postgres.Store, run, task string) string {
	t.Helper()
	rs, err := s.Status(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range rs.Tasks {
		if ts.Task == task {
			return ts.State
		}
	}
	t.Fatalf("no task %s in %+v", task, rs.Tasks)
	return ""
}

// TestFinishRecordsTheAttemptsEnd: Finish with Result.End records the
// attempt's end (and its process, Outcome.Ran) and the DAG's step in one
// transaction.
func TestFinishRecordsTheAttemptsEnd(t *testing.T) {
	s := open(t, pg.Server(t), nil)
	ctx := context.Background()
	ref, a := submitted(t, s)
	ran := &store.Running{Process: store.Process{PID: 4242, PGID: 4242, Host: "h"}, Lease: time.Minute}
	err := s.Finish(ctx, "w1", ref, queue.Result{Ending: queue.Succeeded,
		End: &queue.AttemptEnd{Ref: a.AttemptRef, Outcome: store.Outcome{State: store.AttemptSucceeded, Ran: ran}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetAttempt(ctx, a.AttemptRef)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.AttemptSucceeded || got.PID != 4242 || got.Ended.IsZero() {
		t.Fatalf("attempt after Finish: %+v", got)
	}
	if st := workState(t, s, ref.Run, "a"); st != queue.WorkSucceeded {
		t.Fatalf("a is %s, want succeeded", st)
	}
	if st := workState(t, s, ref.Run, "b"); st != queue.WorkReady {
		t.Fatalf("b is %s, want ready", st)
	}
}

// TestFinishIsAtomic: when the attempt's end cannot be recorded (here: it
// was recorded already with another outcome), the DAG does not move either.
func TestFinishIsAtomic(t *testing.T) {
	s := open(t, pg.Server(t), nil)
	ctx := context.Background()
	ref, a := submitted(t, s)
	if _, err := s.MarkRunning(ctx, a.AttemptRef, 4242, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptFailed, Class: "x", ExitCode: 1}); err != nil {
		t.Fatal(err)
	}
	err := s.Finish(ctx, "w1", ref, queue.Result{Ending: queue.Succeeded,
		End: &queue.AttemptEnd{Ref: a.AttemptRef, Outcome: store.Outcome{State: store.AttemptSucceeded}}})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Finish over a failed attempt: %v, want ErrConflict", err)
	}
	if st := workState(t, s, ref.Run, "a"); st != queue.WorkClaimed {
		t.Fatalf("a is %s after a refused Finish, want still claimed", st)
	}
	if st := workState(t, s, ref.Run, "b"); st != queue.WorkBlocked {
		t.Fatalf("b is %s after a refused Finish, want blocked", st)
	}
	// An end for another task's attempt is refused before anything.
	other := a.AttemptRef
	other.Task = "b"
	if err := s.Finish(ctx, "w1", ref, queue.Result{Ending: queue.Succeeded,
		End: &queue.AttemptEnd{Ref: other, Outcome: store.Outcome{State: store.AttemptSucceeded}}}); err == nil {
		t.Fatal("Finish accepted the end of another task's attempt")
	}
}

// TestFinishAfterTheClaimWasLost: a worker whose claim was taken over still
// records its attempt's end (the process did end), and learns the claim is
// gone; the task's state is the new owner's.
func TestFinishAfterTheClaimWasLost(t *testing.T) {
	s := open(t, pg.Server(t), nil)
	ctx := context.Background()
	ref, a := submitted(t, s)
	if _, err := s.MarkRunning(ctx, a.AttemptRef, 4242, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The claim expires (worker w1 stopped renewing) and is swept.
	if _, err := s.Pool().Exec(ctx, `UPDATE work SET claim_expiry = pipec_now() - interval '1 second' WHERE run = $1 AND task = 'a'`, ref.Run); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	err := s.Finish(ctx, "w1", ref, queue.Result{Ending: queue.Succeeded,
		End: &queue.AttemptEnd{Ref: a.AttemptRef, Outcome: store.Outcome{State: store.AttemptSucceeded}}})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Finish of a lost claim: %v, want ErrLeaseLost", err)
	}
	got, err := s.GetAttempt(ctx, a.AttemptRef)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.AttemptSucceeded {
		t.Fatalf("the attempt's end was not recorded: %s", got.State)
	}
	// The sweep's decision stands (global = 0: no failover, the task failed).
	if st := workState(t, s, ref.Run, "a"); st != queue.WorkFailed {
		t.Fatalf("a is %s, want failed (the sweep's decision)", st)
	}
	if st := workState(t, s, ref.Run, "b"); st != queue.WorkNotRun {
		t.Fatalf("b is %s, want not_run", st)
	}
}

// TestClaimStartingReadsThePriorAttempts: the claim hands the visit the
// task's attempts on its resource (queue.Claim.Prior), its new one among
// them, exactly as TaskAttempts reads them after it.
func TestClaimStartingReadsThePriorAttempts(t *testing.T) {
	s := open(t, pg.Server(t), nil)
	ctx := context.Background()
	run, err := s.Submit(ctx, queue.Submission{
		Run:  store.NewRun{Pipeline: "p", Interval: "2024-01-01", CodeVersion: "1"},
		Plan: []byte(`{}`), BaseDir: "/spec", Interval: "2024-01-01",
		Tasks: []queue.Task{{Name: "a"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// An earlier attempt of the task (an earlier visit's, ended).
	early, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: "a", Resource: "p@2024-01-01", Worker: "w0", Queued: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.FinishAttempt(ctx, early.AttemptRef, store.Outcome{State: store.AttemptFailed, Class: "transient", ExitCode: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Register(ctx, queue.WorkerInfo{Name: "w1", Host: "h", PID: 1, Slots: 1}, time.Minute); err != nil {
		t.Fatal(err)
	}
	cl, err := s.ClaimStarting(ctx, "w1", time.Minute, store.AttemptSpec{Worker: "w1", Host: "h", Boot: "b"})
	if err != nil || cl == nil || cl.Attempt == nil {
		t.Fatalf("claim: %+v, %v", cl, err)
	}
	want, err := s.TaskAttempts(ctx, "p@2024-01-01", "a")
	if err != nil {
		t.Fatal(err)
	}
	if !cl.HasPrior || len(want) != 2 || want[1].AttemptRef != cl.Attempt.AttemptRef {
		t.Fatalf("prior read: %v, attempts %+v, claimed %+v", cl.HasPrior, want, cl.Attempt)
	}
	if diff := cmp.Diff(want, cl.Prior); diff != "" {
		t.Errorf("the claim's prior attempts differ from TaskAttempts (-want +got):\n%s", diff)
	}
}
