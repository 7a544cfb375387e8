package worker_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// hookBin is pipec built with -tags pipec_testhook (runtime/worker/hook_testhook.go):
// a worker that kills itself with SIGKILL where PIPEC_TEST_HOOK says. Built
// once, by the first test that needs it.
var (
	hookOnce sync.Once
	hookBin  string
	hookErr  error
)

func hookPipec(t testing.TB) string {
	t.Helper()
	hookOnce.Do(func() {
		hookBin = filepath.Join(filepath.Dir(pipecBin), "pipec-testhook")
		build := exec.Command("go", "build", "-tags", "pipec_testhook", "-o", hookBin, "./cmd/pipec")
		build.Dir = filepath.Join("..", "..")
		if out, err := build.CombinedOutput(); err != nil {
			hookErr = err
			t.Logf("%s", out)
		}
	})
	if hookErr != nil {
		t.Fatalf("building pipec with the test hook: %v", hookErr)
	}
	return hookBin
}

// hookedWorker starts a worker of hookPipec with PIPEC_TEST_HOOK=hook.
func (e *env) hookedWorker(t *testing.T, name, hook string) *proc {
	t.Helper()
	return e.workerWith(hookPipec(t), []string{"PIPEC_TEST_HOOK=" + hook}, name)
}

func (e *env) attempts(run, task string) []store.Attempt {
	e.t.Helper()
	as, err := e.st.Attempts(context.Background(), run)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []store.Attempt
	for _, a := range as {
		if a.Task == task {
			out = append(out, a)
		}
	}
	return out
}

func (e *env) events(run, kind, task string) int {
	e.t.Helper()
	evs, err := e.st.Events(context.Background(), run)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind && ev.Task == task {
			n++
		}
	}
	return n
}

func taskState(rs queue.RunStatus, task string) string {
	for _, ts := range rs.Tasks {
		if ts.Task == task {
			return ts.State
		}
	}
	return ""
}

// TestKilledAfterTheEndIsNotRerun kills a real worker (SIGKILL, from its
// test hook) at the first moment its extract's attempt's end is on record.
// That end is recorded in the transaction that ends the visit and advances
// the DAG (queue.Result.End), so the DAG moved too: a second worker runs
// only clean (which w1's Finish may have claimed before it died: then w2
// takes that claim over); extract is not run again, its claim is not swept, and its one
// attempt is the version the sink shows. (Before, the attempt's end was
// recorded first, on its own: a worker killed there left extract claimed,
// and after its claim expired it ran again under a new token.)
func TestKilledAfterTheEndIsNotRerun(t *testing.T) { onBoth(t, testKilledAfterTheEndIsNotRerun) }

func testKilledAfterTheEndIsNotRerun(t *testing.T, b backend) {
	e := newEnvOn(t, b, dagSpec, dagFiles)
	w1 := e.hookedWorker(t, "w1", "after-finish:extract")
	run := e.submit("2024-01-01")
	w1.WaitKilled(t)
	if as := e.attempts(run, "extract"); len(as) != 1 || as[0].State != store.AttemptSucceeded {
		t.Fatalf("extract's attempts when w1 died: %+v", as)
	}
	rs, err := e.st.Status(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if st := taskState(rs, "extract"); st != queue.WorkSucceeded {
		t.Fatalf("extract is %s when w1 died with its attempt's end recorded", st)
	}
	e.worker("w2")
	rs = e.until(run, "the run's end", finished)
	if rs.Run.State != store.RunSucceeded {
		t.Fatalf("run %s: %+v", rs.Run.State, rs.Tasks)
	}
	as := e.attempts(run, "extract")
	if len(as) != 1 {
		t.Fatalf("extract ran again: %d attempts %+v", len(as), as)
	}
	if got := e.starts(run, "extract"); strings.Join(got, " ") != "w1" {
		t.Fatalf("extract's starts: %v, want [w1]", got)
	}
	if n := e.events(run, queue.EventWorkLeaseLost, "extract"); n != 0 {
		t.Fatalf("extract's claim was swept %d times", n)
	}
	wantClean := "w2"
	if _, ok := e.st.(queue.FinishClaimer); ok {
		// w1's Finish claimed clean in the same transaction: w1 died
		// holding that claim, and w2 took it over once it expired.
		wantClean = "w1 w2"
	}
	if got := e.starts(run, "clean"); strings.Join(got, " ") != wantClean {
		t.Fatalf("clean's starts: %v, want [%s]", got, wantClean)
	}
	data, err := os.ReadFile(filepath.Join(e.dir, "warehouse", "2024-01-01", "data.csv"))
	if err != nil || string(data) != "id,worker\n1,w1\n" {
		t.Fatalf("published %q (%v), want w1's extract", data, err)
	}
}

// TestKilledBeforeTheEndRunsAgain kills the worker just before that
// transaction: nothing of the visit's end is on record (the attempt is not
// succeeded although its process ended and its output was accepted), so the
// claim expires, the sweep makes the attempt unknown, and the task runs
// again under a higher token; the run still succeeds, with the second
// attempt's data published.
func TestKilledBeforeTheEndRunsAgain(t *testing.T) { onBoth(t, testKilledBeforeTheEndRunsAgain) }

func testKilledBeforeTheEndRunsAgain(t *testing.T, b backend) {
	e := newEnvOn(t, b, dagSpec, dagFiles)
	w1 := e.hookedWorker(t, "w1", "before-finish:extract")
	run := e.submit("2024-01-01")
	w1.WaitKilled(t)
	if as := e.attempts(run, "extract"); len(as) != 1 || as[0].State.Finished() {
		t.Fatalf("extract's attempts when w1 died before its Finish: %+v", as)
	}
	e.worker("w2")
	rs := e.until(run, "the run's end", finished)
	if rs.Run.State != store.RunSucceeded {
		t.Fatalf("run %s: %+v", rs.Run.State, rs.Tasks)
	}
	as := e.attempts(run, "extract")
	if len(as) != 2 || as[0].State != store.AttemptUnknown || as[1].State != store.AttemptSucceeded || as[1].Token <= as[0].Token {
		t.Fatalf("extract's attempts: %+v", as)
	}
	if got := e.starts(run, "extract"); strings.Join(got, " ") != "w1 w2" {
		t.Fatalf("extract's starts: %v, want [w1 w2]", got)
	}
	data, err := os.ReadFile(filepath.Join(e.dir, "warehouse", "2024-01-01", "data.csv"))
	if err != nil || string(data) != "id,worker\n1,w2\n" {
		t.Fatalf("published %q (%v), want w2's extract", data, err)
	}
}

// TestStoppedAfterTheEndHandsBackTheNextClaim stops a real worker (SIGTERM,
// from its test hook) the moment its extract's visit ended. Where the
// queue claims in the same transaction (queue.FinishClaimer) the worker
// holds clean's claim by then, before any visit of it began: stopping, it
// hands that claim back uncounted, as any visit it stops, and a second
// worker runs clean as its first start.
func TestStoppedAfterTheEndHandsBackTheNextClaim(t *testing.T) {
	onBoth(t, testStoppedAfterTheEndHandsBackTheNextClaim)
}

func testStoppedAfterTheEndHandsBackTheNextClaim(t *testing.T, b backend) {
	e := newEnvOn(t, b, dagSpec, dagFiles)
	w1 := e.hookedWorker(t, "w1", "after-finish:extract:term")
	run := e.submit("2024-01-01")
	select {
	case <-w1.Done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("worker w1 did not stop:\n%s", w1.Output())
	}
	if ee, ok := w1.Err.(*exec.ExitError); !ok || ee.ExitCode() != 130 || !strings.Contains(w1.Output(), "worker w1 stopped") {
		t.Fatalf("w1 exited with %v after SIGTERM, want 130 after a clean stop\n%s", w1.Err, w1.Output())
	}
	rs, err := e.st.Status(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range rs.Tasks {
		if ts.Task == "clean" && (ts.State != queue.WorkReady || ts.Failover.Starts != 0) {
			t.Fatalf("clean after w1 stopped: %+v\n%s", ts, w1.Output())
		}
	}
	e.worker("w2")
	rs = e.until(run, "the run's end", finished)
	if rs.Run.State != store.RunSucceeded {
		t.Fatalf("run %s: %+v", rs.Run.State, rs.Tasks)
	}
	for _, ts := range rs.Tasks {
		if ts.Task == "clean" && (ts.Failover.Starts != 1 || ts.Failover.Failovers != 0) {
			t.Fatalf("clean's counts: %+v", ts.Failover)
		}
	}
	if as := e.attempts(run, "clean"); len(as) == 0 || as[len(as)-1].State != store.AttemptSucceeded {
		t.Fatalf("clean's attempts: %+v", as)
	}
	// w1's Finish did claim clean, and w1 handed it back.
	if got := e.starts(run, "clean"); strings.Join(got, " ") != "w1 w2" {
		t.Fatalf("clean's claims: %v, want [w1 w2]\n%s", got, w1.Output())
	}
	if n := e.events(run, queue.EventWorkHandedBack, "clean"); n != 1 {
		t.Fatalf("clean handed back %d times, want 1\n%s", n, w1.Output())
	}
}
