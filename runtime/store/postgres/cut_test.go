package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/postgres"
)

// TestSessionEndedAtCommit: the server ends the session under the COMMIT
// of an attempt's start, of its process's record, of its end, of an
// event, of a retry's count or of the run's end (SQLSTATE 57P01, as a restart's shutdown does; here a deferred
// trigger ends its own session, once, so nothing of the write committed).
// Whether it committed is unknown to the client: the start and the event
// read back the row their INSERT returned and are made again when it is
// not there; the others, which change nothing when made twice, are made
// again. Each write
// succeeds, once. Before, each failed ("the state database does not
// answer"), and a local run on PostgreSQL failed the task with class
// store: TestRunRidesOutBlips (cli), which restarts the server under a
// run, did now and then.
func TestSessionEndedAtCommit(t *testing.T) {
	srv := pg.Server(t)
	for _, c := range []struct {
		name, on, when string
	}{
		{"start", "INSERT ON attempts", "NEW.task = 'cut'"},
		{"running", "UPDATE ON attempts", "NEW.state = 'running'"},
		{"end", "UPDATE ON attempts", "NEW.state = 'succeeded'"},
		{"event", "INSERT ON events", "NEW.kind = 'test.cut'"},
		{"a retry's count", "UPDATE ON runs", "NEW.retries > OLD.retries"},
		{"run's end", "UPDATE ON runs", "NEW.state = 'succeeded'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := open(t, srv, nil)
			ctx := context.Background()
			run, err := s.CreateRun(ctx, store.NewRun{Pipeline: "p", Interval: "2024-01-01", CodeVersion: "1"})
			if err != nil {
				t.Fatal(err)
			}
			cutOnceAtCommit(t, s, c.on, c.when)
			a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: "cut", Resource: "p@2024-01-01", Queued: true})
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			if _, err := s.MarkRunning(ctx, a.AttemptRef, 42, 0); err != nil {
				t.Fatalf("running: %v", err)
			}
			if err := s.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptSucceeded}); err != nil {
				t.Fatalf("end: %v", err)
			}
			seq, err := s.AppendEvent(ctx, store.Event{Run: run.ID, Kind: "test.cut", Task: "cut", Attempt: a.Number})
			if err != nil {
				t.Fatalf("event: %v", err)
			}
			c, err := s.TakeRetry(ctx, run.ID, func(int) int { return 3 })
			if err != nil || !c.Taken || c.Used != 1 {
				t.Fatalf("a retry's count: %+v, %v; want the first of 3 taken", c, err)
			}
			if err := s.FinishRun(ctx, run.ID, store.RunSucceeded); err != nil {
				t.Fatalf("run's end: %v", err)
			}
			if r, err := s.GetRun(ctx, run.ID); err != nil || r.State != store.RunSucceeded {
				t.Fatalf("run %+v, %v: want succeeded", r, err)
			}
			var cuts int64
			if err := s.Pool().QueryRow(ctx, `SELECT last_value FROM cuts`).Scan(&cuts); err != nil || cuts < 2 {
				t.Fatalf("the trigger ran %d time(s) (%v): the session was not ended", cuts, err)
			}
			as, err := s.Attempts(ctx, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(as) != 1 || as[0].Token != a.Token || as[0].State != store.AttemptSucceeded || as[0].PID != 42 {
				t.Fatalf("attempts %+v, want the one started (%s, token %d), succeeded", as, a.AttemptRef, a.Token)
			}
			evs, err := s.Events(ctx, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			var cutEvents []int64
			for _, e := range evs {
				if e.Kind == "test.cut" {
					cutEvents = append(cutEvents, e.Seq)
				}
			}
			if len(cutEvents) != 1 || cutEvents[0] != seq {
				t.Fatalf("events test.cut at %v, want one at %d", cutEvents, seq)
			}
		})
	}
}

// TestRunMadeOrCancelledAtCommitCut: the server ends the session under
// the COMMIT of a run's creation (pipec run), of a submission (pipec
// submit) or of a cancellation (pipec cancel), as a restart does. The
// creation and the submission are settled by the run's row, which the
// INSERT returned before the COMMIT (made again, a second run of the
// interval would be refused as busy by the first, had it committed); the
// cancellation, which changes nothing made twice, is made again. Each
// succeeds, once. Before, each failed ("the state database does not
// answer"): a restart of PostgreSQL at that moment failed pipec run, pipec
// submit or pipec cancel.
func TestRunMadeOrCancelledAtCommitCut(t *testing.T) {
	srv := pg.Server(t)
	ctx := context.Background()
	nr := store.NewRun{Pipeline: "p", Interval: "2024-01-01", CodeVersion: "1"}
	runs := func(t *testing.T, s *postgres.Store) []store.Run {
		rs, err := s.ListRuns(ctx, store.RunFilter{Pipeline: "p"})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	t.Run("creation", func(t *testing.T) {
		s := open(t, srv, nil)
		cutOnceAtCommit(t, s, "INSERT ON runs", "true")
		r, err := s.CreateRun(ctx, nr)
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if rs := runs(t, s); len(rs) != 1 || rs[0].ID != r.ID || r.ID != "p/2024-01-01/r1" {
			t.Fatalf("runs %+v, want the one created, %s", rs, r.ID)
		}
		// What tells a creation that committed from one that did not: its
		// id with its creation time, as the INSERT returned them.
		var there bool
		if err := s.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE id = $1 AND created = $2)`, r.ID, r.Created).Scan(&there); err != nil || !there {
			t.Fatalf("run %s created at %s is not found by both: %v", r.ID, r.Created, err)
		}
		cutsAtLeast(t, s, 2)
	})
	t.Run("submission", func(t *testing.T) {
		s := open(t, srv, nil)
		cutOnceAtCommit(t, s, "INSERT ON work", "true")
		r, err := s.Submit(ctx, queue.Submission{Run: nr, Plan: []byte(`{}`), BaseDir: "/spec", Interval: "2024-01-01",
			Tasks: []queue.Task{{Name: "a"}}})
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		if rs := runs(t, s); len(rs) != 1 || rs[0].ID != r.ID {
			t.Fatalf("runs %+v, want the one submitted, %s", rs, r.ID)
		}
		st, err := s.Status(ctx, r.ID)
		if err != nil || len(st.Tasks) != 1 || st.Tasks[0].State != queue.WorkReady {
			t.Fatalf("status %+v, %v: want its one task ready", st, err)
		}
		cutsAtLeast(t, s, 2)
	})
	t.Run("cancellation", func(t *testing.T) {
		s := open(t, srv, nil)
		r, err := s.CreateRun(ctx, nr)
		if err != nil {
			t.Fatal(err)
		}
		cutOnceAtCommit(t, s, "UPDATE ON runs", "NEW.cancelled <> ''")
		got, err := s.CancelRun(ctx, r.ID, "wrong input", "ann")
		if err != nil || got.State != store.RunCancelled || got.Cancelled != store.CancelledBy("ann", "wrong input") {
			t.Fatalf("cancel: %+v, %v; want cancelled by ann", got, err)
		}
		if _, err := s.CancelRun(ctx, r.ID, "again", "bob"); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("another cancellation of the cancelled run: %v, want a conflict", err)
		}
		cutsAtLeast(t, s, 2)
	})
}

// TestPoolSlotHeldAtCommitCut: the server ends the session under the
// COMMIT of a pool slot's hold (a Temporal visit of a pooled task takes
// one): made again, the hold is the same holder's one hold, and the slot
// is held once. Before, the hold failed ("the state database does not
// answer").
func TestPoolSlotHeldAtCommitCut(t *testing.T) {
	s := open(t, pg.Server(t), nil)
	ctx := context.Background()
	cutOnceAtCommit(t, s, "INSERT ON pool_holds", "true")
	h := queue.PoolHolder{Run: "p/2024-01-01/r1", Task: "a", Worker: "w1"}
	key := queue.PoolKey("p", "backfill")
	if busy, held, err := s.HoldPoolSlot(ctx, key, 1, h, time.Minute); err != nil || !held || busy != 0 {
		t.Fatalf("hold: busy %d, held %v, %v; want the free slot held", busy, held, err)
	}
	other := queue.PoolHolder{Run: "p/2024-01-02/r1", Task: "a", Worker: "w2"}
	if busy, held, err := s.HoldPoolSlot(ctx, key, 1, other, time.Minute); err != nil || held || busy != 1 {
		t.Fatalf("another's hold: busy %d, held %v, %v; want refused, the one slot busy once", busy, held, err)
	}
	cutsAtLeast(t, s, 2)
}

// cutsAtLeast fails t unless cutOnceAtCommit's trigger ran n times or
// more: the session was ended once, and the write made again.
func cutsAtLeast(t *testing.T, s *postgres.Store, n int64) {
	t.Helper()
	var cuts int64
	if err := s.Pool().QueryRow(context.Background(), `SELECT last_value FROM cuts`).Scan(&cuts); err != nil || cuts < n {
		t.Fatalf("the trigger ran %d time(s) (%v): the session was not ended", cuts, err)
	}
}

// cutOnceAtCommit has the server end the session of the first transaction
// that makes a row match when, after on ("INSERT ON attempts", say), at
// its COMMIT (a deferred trigger): the session ends as a restart ends
// it, and the transaction does not commit.
func cutOnceAtCommit(t *testing.T, s *postgres.Store, on, when string) {
	t.Helper()
	if _, err := s.Pool().Exec(context.Background(), `
CREATE SEQUENCE cuts;
CREATE FUNCTION cut_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF `+when+` AND nextval('cuts') = 1 THEN
		PERFORM pg_terminate_backend(pg_backend_pid());
	END IF;
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER cut_at_commit AFTER `+on+` DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION cut_at_commit();`); err != nil {
		t.Fatal(err)
	}
}

// TestWorkerRegisteredAtCommitCut: the server ends the session under the
// COMMIT of a worker's registration, of its stopping or of its end (a
// restart as workers start or stop, in a rolling deploy): each is made
// again, the same worker's, and the worker ends registered as stopped.
// Before, each failed ("the state database does not answer"), and a
// worker starting then exited.
func TestWorkerRegisteredAtCommitCut(t *testing.T) {
	srv := pg.Server(t)
	for _, c := range []struct{ name, on, when string }{
		{"register", "INSERT ON workers", "NEW.state = 'live'"},
		{"stopping", "UPDATE ON workers", "NEW.state = 'stopping'"},
		{"deregister", "UPDATE ON workers", "NEW.state = 'stopped'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := open(t, srv, nil)
			ctx := context.Background()
			cutOnceAtCommit(t, s, c.on, c.when)
			w := queue.WorkerInfo{Name: "w1", Host: "h", PID: 7, Slots: 1}
			if err := s.Register(ctx, w, time.Minute); err != nil {
				t.Fatalf("register: %v", err)
			}
			if err := s.Stopping(ctx, "w1"); err != nil {
				t.Fatalf("stopping: %v", err)
			}
			if err := s.Deregister(ctx, "w1"); err != nil {
				t.Fatalf("deregister: %v", err)
			}
			ws, err := s.Workers(ctx)
			if err != nil || len(ws) != 1 || ws[0].State != queue.WorkerStopped {
				t.Fatalf("workers %+v, %v: want w1, stopped", ws, err)
			}
			cutsAtLeast(t, s, 2)
		})
	}
}

// TestResolvedAtCommitCut: the server ends the session under the COMMIT
// of pipec resolve: made again, it finds its own resolution and says the
// attempt is settled, once; another's resolution of it is still refused.
// Before, it failed ("the state database does not answer"), and tried
// again it said the attempt could not be resolved, being resolved.
func TestResolvedAtCommitCut(t *testing.T) {
	s := open(t, pg.Server(t), nil)
	ctx := context.Background()
	run, err := s.CreateRun(ctx, store.NewRun{Pipeline: "p", Interval: "2024-01-01", CodeVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: "charge", Resource: "p@2024-01-01"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptUnknown, Class: "killed"}); err != nil {
		t.Fatal(err)
	}
	cutOnceAtCommit(t, s, "UPDATE ON attempts", "NEW.class = 'resolved'")
	got, err := s.ResolveAttempt(ctx, a.AttemptRef, store.AttemptSucceeded, "the ledger has it", "ann@h")
	if err != nil || got.State != store.AttemptSucceeded || got.Class != store.ClassResolved {
		t.Fatalf("resolve: %+v, %v; want succeeded, resolved", got, err)
	}
	if _, err := s.ResolveAttempt(ctx, a.AttemptRef, store.AttemptSucceeded, "the ledger has it", "bob@h"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("another's resolution of a resolved attempt: %v, want store.ErrConflict", err)
	}
	cutsAtLeast(t, s, 2)
	evs, err := s.Events(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Kind == store.EventAttemptResolved {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d attempt.resolved events, want 1", n)
	}
}
