package worker_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// A visit whose claim was taken over does not touch the visit that took
// it. On an SQLite state, where a claim does not read the task's attempts
// in its own transaction, w1 is stopped (SIGSTOP) after it claimed the
// task and before its visit read them (the test build's pause), past its
// lease: w2 takes the task over and runs it. The test then holds the
// state's write lock, so w1's heartbeats cannot tell it its claim is gone
// while its reads still go through, and resumes it. Its visit, on the same
// machine as w2, finds w2's attempt unfinished: it must not end it as an
// orphan of its own. It asks the store first, gets its answer once the
// lock is freed (the claim is w2's), and stops. w2's attempt succeeds, and
// so does the run.
func TestStaleVisitLeavesTheTakeoverAlone(t *testing.T) {
	e := newEnvOn(t, onSQLite, scenario.Stale, map[string]string{"load.sh": scenario.StaleLoad})
	w1 := e.hookedWorker(t, "w1", "before-visit:load:pause")
	run := e.submit("2024-01-01")
	e.waitFile("paused")
	w1.signal(t, syscall.SIGSTOP)
	e.worker("w2")
	e.until(run, "w2 running the task", func(queue.RunStatus) bool { return e.lines("ran", "w2 start") > 0 })

	lock, err := os.OpenFile(e.url+"-lock", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "resume"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w1.signal(t, syscall.SIGCONT)
	// Long enough for w1's visit to read and end a process (milliseconds),
	// shorter than the 1 s lease w2's heartbeats keep renewing.
	time.Sleep(300 * time.Millisecond)
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}

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
