package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/postgres"
)

// submitWith submits a run of p's 2024-01-01 with tasks and registers
// worker w1.
func submitWith(t *testing.T, s *postgres.Store, tasks ...queue.Task) store.Run {
	t.Helper()
	ctx := context.Background()
	run, err := s.Submit(ctx, queue.Submission{
		Run:  store.NewRun{Pipeline: "p", Interval: "2024-01-01", CodeVersion: "1"},
		Plan: []byte(`{}`), BaseDir: "/spec", Interval: "2024-01-01",
		Tasks: tasks,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Register(ctx, queue.WorkerInfo{Name: "w1", Host: "h", PID: 1, Slots: 1}, time.Minute); err != nil {
		t.Fatal(err)
	}
	return run
}

// submitted submits a run of two tasks, a -> b, registers worker w1 and has
// it claim a and start its attempt (queued, as a visit starts one).
func submitted(t *testing.T, s *postgres.Store) (queue.Ref, store.Attempt) {
	t.Helper()
	ctx := context.Background()
	run := submitWith(t, s, queue.Task{Name: "a"}, queue.Task{Name: "b", Needs: []string{"a"}})
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

// running is submitted, with a's process recorded (pid 4242, a lease of
// a minute): a as the visit's MarkRunning left it.
func running(t *testing.T, s *postgres.Store) (queue.Ref, store.Attempt) {
	t.Helper()
	ref, a := submitted(t, s)
	a, err := s.MarkRunning(context.Background(), a.AttemptRef, 4242, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return ref, a
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
	srv := pg.Server(t)
	assuming(t, func(t *testing.T, was bool) {
		s := open(t, srv, nil)
		ctx := context.Background()
		ref, a := submitted(t, s)
		ran := &store.Running{Process: store.Process{PID: 4242, PGID: 4242, Host: "h"}, Lease: time.Minute}
		err := s.Finish(ctx, "w1", ref, queue.Result{Ending: queue.Succeeded,
			End: end(a, store.Outcome{State: store.AttemptSucceeded, Ran: ran}, was)})
		if err != nil {
			t.Fatal(err)
		}
		finishedOnce(t, s, a)
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
	})
}

// assuming runs test twice: the visit's end without and with the attempt as
// the visit left it (store.Outcome.Was), which Finish may assume
// instead of reading it; where it no longer holds, the outcome must be
// the same as without it.
func assuming(t *testing.T, test func(t *testing.T, was bool)) {
	for _, was := range []bool{false, true} {
		name := "read"
		if was {
			name = "assumed"
		}
		t.Run(name, func(t *testing.T) { test(t, was) })
	}
}

// end is a's end o, with a as Was when was.
func end(a store.Attempt, o store.Outcome, was bool) *queue.AttemptEnd {
	e := &queue.AttemptEnd{Ref: a.AttemptRef, Outcome: o}
	if was {
		e.Outcome.Was = &a
	}
	return e
}

// finishedOnce fails unless a's end was logged exactly once.
func finishedOnce(t *testing.T, s *postgres.Store, a store.Attempt) {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM events WHERE run = $1 AND task = $2 AND attempt = $3 AND kind = $4`,
		a.Run, a.Task, a.Number, store.EventAttemptFinished).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d %s events for %s, want 1", n, store.EventAttemptFinished, a.AttemptRef)
	}
}

// TestFinishIsAtomic: when the attempt's end cannot be recorded (here: it
// was recorded already with another outcome), the DAG does not move either.
func TestFinishIsAtomic(t *testing.T) {
	srv := pg.Server(t)
	assuming(t, func(t *testing.T, was bool) {
		s := open(t, srv, nil)
		ctx := context.Background()
		ref, a := running(t, s)
		if err := s.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptFailed, Class: "x", ExitCode: 1}); err != nil {
			t.Fatal(err)
		}
		err := s.Finish(ctx, "w1", ref, queue.Result{Ending: queue.Succeeded,
			End: end(a, store.Outcome{State: store.AttemptSucceeded}, was)})
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
		finishedOnce(t, s, a)
	})
}

// TestFinishAfterTheClaimWasLost: a worker whose claim was taken over still
// records its attempt's end (the process did end), and learns the claim is
// gone; the task's state is the new owner's.
func TestFinishAfterTheClaimWasLost(t *testing.T) {
	srv := pg.Server(t)
	assuming(t, func(t *testing.T, was bool) {
		s := open(t, srv, nil)
		ctx := context.Background()
		ref, a := running(t, s)
		// The claim expires (worker w1 stopped renewing) and is swept.
		if _, err := s.Pool().Exec(ctx, `UPDATE work SET claim_expiry = pipec_now() - interval '1 second' WHERE run = $1 AND task = 'a'`, ref.Run); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Sweep(ctx); err != nil || n != 1 {
			t.Fatalf("sweep: %d, %v", n, err)
		}
		err := s.Finish(ctx, "w1", ref, queue.Result{Ending: queue.Succeeded,
			End: end(a, store.Outcome{State: store.AttemptSucceeded}, was)})
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
		finishedOnce(t, s, a)
	})
}

// TestFinishAssumingAClaimTakenOver: the attempt is as the visit left it,
// but the claim went to another worker: the end assumed is not kept half
// (the attempt's end written, the DAG not stepped), and the end is
// recorded once, as for any lost claim.
func TestFinishAssumingAClaimTakenOver(t *testing.T) {
	s := open(t, pg.Server(t), nil)
	ctx := context.Background()
	ref, a := submitted(t, s)
	if _, err := s.Pool().Exec(ctx, `UPDATE work SET worker = 'w2' WHERE run = $1 AND task = 'a'`, ref.Run); err != nil {
		t.Fatal(err)
	}
	ran := &store.Running{Process: store.Process{PID: 4242, PGID: 4242, Host: "h"}, Lease: time.Minute}
	err := s.Finish(ctx, "w1", ref, queue.Result{Ending: queue.Succeeded,
		End: end(a, store.Outcome{State: store.AttemptSucceeded, Ran: ran}, true)})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Finish of a claim taken over: %v, want ErrLeaseLost", err)
	}
	got, err := s.GetAttempt(ctx, a.AttemptRef)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.AttemptSucceeded || got.PID != 4242 {
		t.Fatalf("the attempt's end was not recorded: %+v", got)
	}
	finishedOnce(t, s, a)
	if st := workState(t, s, ref.Run, "a"); st != queue.WorkClaimed {
		t.Fatalf("a is %s, want still claimed (by w2)", st)
	}
	if st := workState(t, s, ref.Run, "b"); st != queue.WorkBlocked {
		t.Fatalf("b is %s, want blocked", st)
	}
}

// TestClaimStartingReadsThePriorAttempts: the claim hands the visit the
// task's attempts on its resource (queue.Claim.Prior), its new one among
// them, exactly as TaskAttempts reads them after it, and how many attempts
// the task made before, with the claim's events in their order.
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
	if cl.AttemptBase != 1 || cl.Attempt.Number != 2 {
		t.Errorf("claimed attempt %d after %d attempts, want 2 after 1", cl.Attempt.Number, cl.AttemptBase)
	}
	// The claim's event, then its attempt's start, as a claim and a
	// StartAttempt one after the other write them.
	evs, err := s.Events(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs[len(evs)-2:] {
		kinds = append(kinds, fmt.Sprintf("%s %s#%d", e.Kind, e.Task, e.Attempt))
	}
	if w := []string{queue.EventWorkClaimed + " a#0", store.EventAttemptStarted + " a#2"}; !slices.Equal(kinds, w) {
		t.Errorf("the claim's events = %v, want %v", kinds, w)
	}
}

// TestFinishAssumingAStaleAttempt: the claim is still the worker's, but
// its attempt's lease expired and the attempt was marked unknown meanwhile:
// the visit's end assumed is decided exactly as the end read.
func TestFinishAssumingAStaleAttempt(t *testing.T) {
	srv := pg.Server(t)
	type outcome struct {
		Err              bool
		Attempt, A, B    string
		AttemptsFinished int
	}
	var got [2]outcome
	assuming(t, func(t *testing.T, was bool) {
		s := open(t, srv, nil)
		ctx := context.Background()
		ref, a := running(t, s)
		if _, err := s.Pool().Exec(ctx, `UPDATE attempts SET lease_expiry = pipec_now() - interval '1 second' WHERE run = $1`, ref.Run); err != nil {
			t.Fatal(err)
		}
		if us, err := s.MarkUnknown(ctx); err != nil || len(us) != 1 {
			t.Fatalf("mark unknown: %v, %v", us, err)
		}
		err := s.Finish(ctx, "w1", ref, queue.Result{Ending: queue.Succeeded,
			End: end(a, store.Outcome{State: store.AttemptSucceeded}, was)})
		cur, gerr := s.GetAttempt(ctx, a.AttemptRef)
		if gerr != nil {
			t.Fatal(gerr)
		}
		o := outcome{Err: err != nil, Attempt: string(cur.State), A: workState(t, s, ref.Run, "a"), B: workState(t, s, ref.Run, "b")}
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM events WHERE run = $1 AND kind = $2`, ref.Run, store.EventAttemptFinished).Scan(&o.AttemptsFinished); err != nil {
			t.Fatal(err)
		}
		got[b2i(was)] = o
	})
	if diff := cmp.Diff(got[0], got[1]); diff != "" {
		t.Fatalf("the end assumed differs from the end read (-read +assumed):\n%s", diff)
	}
	t.Logf("both: %+v", got[0])
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestFinishClaimingAtALeaf: a succeeded visit of a task without
// dependents may end its run, so its finish decides under the submission's
// lock; the next task is claimed in the same call all the same, and the
// run's last finish ends the run and claims nothing.
func TestFinishClaimingAtALeaf(t *testing.T) {
	srv := pg.Server(t)
	assuming(t, func(t *testing.T, was bool) {
		s := open(t, srv, nil)
		ctx := context.Background()
		run := submitWith(t, s, queue.Task{Name: "a"}, queue.Task{Name: "b"})
		spec := store.AttemptSpec{Worker: "w1", Host: "h", Boot: "boot"}
		cl, err := s.ClaimStarting(ctx, "w1", time.Minute, spec)
		if err != nil || cl == nil || cl.Task != "a" || cl.Attempt == nil {
			t.Fatalf("claim: %+v, %v", cl, err)
		}
		// ran is the attempt as the visit leaves it once its process ran.
		ran := func(a *store.Attempt) store.Attempt {
			t.Helper()
			r, err := s.MarkRunning(ctx, a.AttemptRef, 4242, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		succeeded := store.Outcome{State: store.AttemptSucceeded}
		a := ran(cl.Attempt)
		next, err := s.FinishClaiming(ctx, "w1", cl.Ref, queue.Result{Ending: queue.Succeeded,
			End: end(a, succeeded, was)}, time.Minute, spec)
		if err != nil || next == nil || next.Task != "b" || next.Attempt == nil || next.Attempt.State != store.AttemptQueued {
			t.Fatalf("FinishClaiming of a: %+v, %v; want b claimed with a queued attempt", next, err)
		}
		finishedOnce(t, s, a)
		if st := workState(t, s, run.ID, "b"); st != queue.WorkClaimed {
			t.Fatalf("b is %s, want claimed", st)
		}
		if r, err := s.GetRun(ctx, run.ID); err != nil || r.State != store.RunRunning {
			t.Fatalf("the run after a: %+v, %v; want running", r, err)
		}
		b := ran(next.Attempt)
		last, err := s.FinishClaiming(ctx, "w1", next.Ref, queue.Result{Ending: queue.Succeeded,
			End: end(b, succeeded, was)}, time.Minute, spec)
		if err != nil || last != nil {
			t.Fatalf("FinishClaiming of b: %+v, %v; want nothing claimed", last, err)
		}
		finishedOnce(t, s, b)
		if r, err := s.GetRun(ctx, run.ID); err != nil || r.State != store.RunSucceeded {
			t.Fatalf("the run after b: %+v, %v; want succeeded", r, err)
		}
	})
}

// claimRunning has worker claim a task, its attempt started with the
// claim, and its process recorded (pid 4242, a lease of a minute), as a
// visit leaves it once the process ran; spec is the worker's, as its
// FinishClaiming passes it.
func claimRunning(t *testing.T, s *postgres.Store, worker string) (cl *queue.Claim, spec store.AttemptSpec, ran store.Attempt) {
	t.Helper()
	ctx := context.Background()
	spec = store.AttemptSpec{Worker: worker, Host: "h", Boot: "boot"}
	cl, err := s.ClaimStarting(ctx, worker, time.Minute, spec)
	if err != nil || cl == nil || cl.Attempt == nil {
		t.Fatalf("claim by %s: %+v, %v", worker, cl, err)
	}
	if ran, err = s.MarkRunning(ctx, cl.Attempt.AttemptRef, 4242, time.Minute); err != nil {
		t.Fatal(err)
	}
	return cl, spec, ran
}

// TestLeavesEndingTogetherEndTheRun: the run's last two tasks, neither with
// dependents, end at once on two workers. Each decides whether its end
// ends the run under the submission's lock (taken in the batch that
// carries its COMMIT), and reads what is left only once it holds the
// lock, so the second to hold it sees the first's end committed and ends
// the run. The lock is held here while both ends are sent, so both wait
// for it with their ends written but not committed: had either read what
// is left before the lock, it would have found the other's task still
// claimed, and with both so the run would never end.
func TestLeavesEndingTogetherEndTheRun(t *testing.T) {
	srv := pg.Server(t)
	assuming(t, func(t *testing.T, was bool) {
		s := open(t, srv, nil)
		ctx := context.Background()
		run := submitWith(t, s, queue.Task{Name: "a"}, queue.Task{Name: "b"})
		if err := s.Register(ctx, queue.WorkerInfo{Name: "w2", Host: "h", PID: 2, Slots: 1}, time.Minute); err != nil {
			t.Fatal(err)
		}
		type visit struct {
			worker string
			spec   store.AttemptSpec
			claim  *queue.Claim
			ran    store.Attempt
		}
		var visits []*visit
		for _, w := range []string{"w1", "w2"} {
			v := &visit{worker: w}
			v.claim, v.spec, v.ran = claimRunning(t, s, w)
			visits = append(visits, v)
		}
		hold, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer hold.Rollback(ctx)
		if _, err := hold.Exec(ctx, `SELECT 1 FROM submissions WHERE run = $1 FOR UPDATE`, run.ID); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, len(visits))
		for _, v := range visits {
			go func() {
				next, err := s.FinishClaiming(ctx, v.worker, v.claim.Ref, queue.Result{Ending: queue.Succeeded,
					End: end(v.ran, store.Outcome{State: store.AttemptSucceeded}, was)}, time.Minute, v.spec)
				if err == nil && next != nil {
					err = fmt.Errorf("%s claimed %s, but no task was left", v.worker, next.Ref)
				}
				errs <- err
			}()
		}
		// Both ends wait for the lock.
		deadline := time.Now().Add(30 * time.Second)
		for {
			var waiting int
			if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE '%submissions%' AND pid <> pg_backend_pid()`).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			if waiting == len(visits) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d ends wait for the submission's lock, want %d", waiting, len(visits))
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := hold.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		for range visits {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		for _, v := range visits {
			finishedOnce(t, s, v.ran)
		}
		if r, err := s.GetRun(ctx, run.ID); err != nil || r.State != store.RunSucceeded {
			t.Fatalf("the run after both ends: %+v, %v; want succeeded", r, err)
		}
	})
}

// TestWakeupsOnlyForTasksLeft: a visit's end that made dependents ready
// wakes the idle workers, unless the same transaction claims the only one
// it made ready: each woken worker would claim and find nothing. What a
// listener hears after each end is read up to a marker the test sends once
// the end committed (notifications arrive in commit order).
func TestWakeupsOnlyForTasksLeft(t *testing.T) {
	srv := pg.Server(t)
	for _, c := range []struct {
		name     string
		tasks    []queue.Task
		claiming bool
		wake     bool
	}{
		{"one made ready and claimed", []queue.Task{{Name: "a"}, {Name: "b", Needs: []string{"a"}}}, true, false},
		{"two made ready, one claimed", []queue.Task{{Name: "a"}, {Name: "b", Needs: []string{"a"}}, {Name: "c", Needs: []string{"a"}}}, true, true},
		{"one made ready, none claimed", []queue.Task{{Name: "a"}, {Name: "b", Needs: []string{"a"}}}, false, true},
		{"none made ready", []queue.Task{{Name: "a"}, {Name: "z"}, {Name: "b", Needs: []string{"a", "z"}}}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			assuming(t, func(t *testing.T, was bool) {
				ctx := context.Background()
				s := open(t, srv, nil)
				submitWith(t, s, c.tasks...)
				cl, spec, a := claimRunning(t, s, "w1")
				if cl.Task != "a" {
					t.Fatalf("claimed %s, want a", cl.Task)
				}
				listen, err := s.Pool().Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer listen.Release()
				if _, err := listen.Exec(ctx, `LISTEN pipec_work`); err != nil {
					t.Fatal(err)
				}
				defer listen.Exec(ctx, `UNLISTEN *`)
				r := queue.Result{Ending: queue.Succeeded, End: end(a, store.Outcome{State: store.AttemptSucceeded}, was)}
				if c.claiming {
					next, err := s.FinishClaiming(ctx, "w1", cl.Ref, r, time.Minute, spec)
					if err != nil || next == nil {
						t.Fatalf("FinishClaiming: %+v, %v", next, err)
					}
				} else if err := s.Finish(ctx, "w1", cl.Ref, r); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Pool().Exec(ctx, `SELECT pg_notify('pipec_work', 'marker')`); err != nil {
					t.Fatal(err)
				}
				woken := false
				for {
					wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					n, err := listen.Conn().WaitForNotification(wctx)
					cancel()
					if err != nil {
						t.Fatal(err)
					}
					if n.Payload == "marker" {
						break
					}
					woken = true
				}
				if woken != c.wake {
					t.Fatalf("idle workers woken: %v, want %v", woken, c.wake)
				}
			})
		})
	}
}
