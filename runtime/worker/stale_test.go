package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// A visit whose claim was taken over does not touch the visit that took
// it. w1 is stopped (SIGSTOP) after it claimed the task and before its
// visit began (the test build's pause), past its lease: w2 takes the task
// over and runs it. The test then keeps w1's heartbeats from telling it
// its claim is gone (on SQLite it holds the state's write lock, on
// PostgreSQL w1's worker row) and resumes it. Its visit, on the same
// machine as w2, must neither end w2's attempt as an orphan of its own nor
// start the task beside it: it asks the store first, gets its answer once
// the lock is freed (the claim is w2's), and stops. w2's attempt succeeds,
// and so does the run.
func TestStaleVisitLeavesTheTakeoverAlone(t *testing.T) { onBoth(t, staleVisit) }

func staleVisit(t *testing.T, b backend) {
	e := newEnvOn(t, b, scenario.Stale, map[string]string{"load.sh": scenario.StaleLoad})
	w1 := e.hookedWorker(t, "w1", "before-visit:load:pause")
	run := e.submit("2024-01-01")
	e.waitFile("paused")
	w1.Signal(t, syscall.SIGSTOP)
	e.worker("w2")
	e.until(run, "w2 running the task", func(queue.RunStatus) bool { return e.lines("ran", "w2 start") > 0 })

	unlock := holdHeartbeats(t, e, b, "w1")
	if err := os.WriteFile(filepath.Join(e.dir, "resume"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w1.Signal(t, syscall.SIGCONT)
	// Long enough for w1's visit to read and end or start a process
	// (milliseconds), shorter than the 1 s lease w2's heartbeats keep
	// renewing.
	time.Sleep(300 * time.Millisecond)
	unlock()

	rs := e.until(run, "the run's end", finished)
	if rs.Run.State != store.RunSucceeded {
		for _, a := range e.attempts(run, "load") {
			t.Logf("attempt %d on %s: %s %s %s", a.Number, a.Worker, a.State, a.Class, a.ErrorTail)
		}
		t.Fatalf("run %s, want succeeded", rs.Run.State)
	}
	if err := scenario.CheckTakeover(e.dir, "w1", "w2", e.attempts(run, "load")); err != nil {
		t.Error(err)
	}
}

// holdHeartbeats keeps worker's heartbeats from being answered until
// the returned func is called: on SQLite the state's write lock is held
// (reads still go through), on PostgreSQL the worker's row is locked (its
// heartbeat's first write waits for it; claims and attempts do not).
func holdHeartbeats(t *testing.T, e *env, b backend, worker string) func() {
	t.Helper()
	if b == onSQLite {
		lock, err := os.OpenFile(e.url+"-lock", os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		return func() { lock.Close() }
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM workers WHERE name = $1 FOR UPDATE`, worker); err != nil {
		t.Fatal(err)
	}
	return func() {
		tx.Rollback(ctx)
		conn.Close(ctx)
	}
}

// A visit that begins late, its worker held up while its heartbeats went
// on (so its claim is still its own), has the store confirm the claim and
// runs the task: once, on its own worker, with no failover. (The test
// build's pause holds the visit alone: the worker's heartbeats go on.)
func TestLateVisitStillHeldRuns(t *testing.T) {
	onBoth(t, func(t *testing.T, b backend) {
		e := newEnvOn(t, b, scenario.Stale, map[string]string{"load.sh": scenario.StaleLoad})
		e.hookedWorker(t, "w1", "before-visit:load:pause")
		run := e.submit("2024-01-01")
		e.waitFile("paused")
		time.Sleep(700 * time.Millisecond) // past half the worker's 1 s lease
		if err := os.WriteFile(filepath.Join(e.dir, "resume"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		rs := e.until(run, "the run's end", finished)
		ts := rs.Tasks[0]
		if rs.Run.State != store.RunSucceeded || ts.Worker != "w1" || ts.Failover.Starts != 1 || ts.Failover.Failovers != 0 {
			t.Fatalf("run %s, task on %q after %d starts and %d failovers; want succeeded on w1 at its first start",
				rs.Run.State, ts.Worker, ts.Failover.Starts, ts.Failover.Failovers)
		}
		if got := e.lines("ran", "w1 "); got != 2 {
			t.Errorf("ran holds %d lines of w1, want its start and its end", got)
		}
		// Begun at once, not handed back and claimed again.
		evs, err := e.st.Events(context.Background(), run)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Kind == queue.EventWorkHandedBack {
				t.Errorf("the task was handed back (%s): the confirmed claim was not used", ev.Payload)
			}
		}
	})
}
