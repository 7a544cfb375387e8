package dispatch_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/pgtest"
	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// TestChaos on Temporal: 3 workers run a 200-task pipeline for 3 intervals
// while one is SIGSTOPped and later resumed and another is killed with
// SIGKILL (a fourth joins). Every run succeeds; every published artifact
// of every interval ends with exactly one complete version, the one the
// state's pointer names; a reader running throughout never sees a partial
// file or another interval's or task's data, nor a token below one it saw
// before. On PostgreSQL (a worker stopped inside an SQLite write
// transaction would keep the file's lock).
func TestChaos(t *testing.T) {
	spec, published := scenario.Chaos(20, scenario.DirectorySink)
	pg := pgtest.Start(t)
	e := newEnvAt(t, spec, map[string]string{"step.sh": scenario.ChaosStep}, pg.NewSchema(t))
	e.worker("w1", "--slots", "2")
	w2 := e.worker("w2", "--slots", "2")
	w3 := e.worker("w3", "--slots", "2")
	days := []string{"2024-01-01", "2024-01-02", "2024-01-03"}
	var runs []string
	for _, d := range days {
		code, run, out := e.submit(d, false, "--heartbeat", "2s")
		if code != 0 {
			t.Fatalf("submit %s: exit %d\n%s", d, code, out)
		}
		runs = append(runs, run)
	}

	reader := scenario.StartReader(e.dir, published, days)

	ctx := context.Background()
	progress := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
			done := 0
			for _, r := range runs {
				as, err := e.st.Attempts(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range as {
					if a.State == store.AttemptSucceeded {
						done++
					}
				}
			}
			if done >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("stuck at %d tasks done, waiting for %d", done, n)
			}
		}
	}
	// openVisits lists the visits w's log shows started and not ended (a
	// "start on" line not yet followed by that task's end), as "run task".
	openVisits := func(w *proc) []string {
		open := map[string]bool{}
		for _, line := range strings.Split(w.Output(), "\n") {
			visit, what, ok := strings.Cut(line, ": ")
			if !ok {
				continue
			}
			open[visit] = strings.HasPrefix(what, "start on ")
		}
		var out []string
		for visit, running := range open {
			if running {
				out = append(out, visit)
			}
		}
		return out
	}
	// attemptOpen reports whether one of visits has an attempt in the state
	// that has not ended: the worker logs a visit's start before the visit
	// starts its attempt, and a worker stopped in between has started
	// nothing, so losing it loses no visit.
	attemptOpen := func(visits []string) bool {
		t.Helper()
		for _, v := range visits {
			run, task, _ := strings.Cut(v, " ")
			as, err := e.st.Attempts(ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range as {
				if a.Task == task && !a.State.Recordable() {
					return true
				}
			}
		}
		return false
	}
	// stopMidVisit stops w (SIGSTOP) in the middle of a visit, so a signal
	// after it catches a visit, not an idle worker: tasks take tens of
	// milliseconds, and with batches of visits a worker may be between
	// activities. Stopped, w writes nothing more, so a visit still open in
	// its log once the pipe is drained, with its attempt started and not
	// ended in the state, is one the stop caught; otherwise it is resumed
	// and stopped again at its next visit.
	stopMidVisit := func(w *proc) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("worker was never stopped in a visit for a minute:\n%s", w.Output())
			}
			if len(openVisits(w)) == 0 {
				continue
			}
			w.Signal(t, syscall.SIGSTOP)
			time.Sleep(50 * time.Millisecond) // what it wrote before the stop reaches its log
			if attemptOpen(openVisits(w)) {
				return
			}
			w.Signal(t, syscall.SIGCONT)
		}
	}
	progress(60)
	stopMidVisit(w2)
	stopped := time.Now()
	progress(150)
	stopMidVisit(w3)
	w3.Signal(t, syscall.SIGKILL)
	e.worker("w4", "--slots", "2")
	progress(300)
	// Resumed only past the 2 s heartbeat timeout, so w2's visit is lost
	// (its completion comes late and is fenced), not merely slow.
	time.Sleep(time.Until(stopped.Add(4 * time.Second)))
	w2.Signal(t, syscall.SIGCONT)

	for _, r := range runs {
		if got := e.until(r); got.State != store.RunSucceeded {
			t.Fatalf("run %s %s", r, got.State)
		}
	}
	reads, readerErr := reader.Stop()
	if len(readerErr) > 0 {
		t.Fatalf("the reader saw %d bad reads of %d, first: %s", len(readerErr), reads, readerErr[0])
	}
	if err := scenario.CheckVisible(ctx, e.st, e.dir, published, days); err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, r := range runs {
		evs, err := e.st.Events(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Kind == queue.EventWorkLeaseLost {
				lost++
			}
		}
	}
	if lost == 0 {
		t.Fatal("no visit was ever lost: the signals hit idle workers")
	}
	t.Logf("%d reads, all complete and current; %d visits lost", reads, lost)
}
