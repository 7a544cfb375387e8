package worker_test

import (
	"context"
	"syscall"
	"testing"

	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// TestChaos: 3 workers run a 200-task pipeline for 5 intervals while one
// is SIGSTOPped and later resumed and another is killed with SIGKILL (a
// fresh one joins). Every run succeeds; every published artifact of every
// interval ends with exactly one complete version, the one the store's
// pointer names; a reader running throughout never sees a partial file or
// another interval's or task's data; and no visible version carries a
// token below one that was visible before.
//
// On one SQLite file the same, without the SIGSTOP: a worker stopped inside
// a write transaction would keep the file's write lock (docs/workers.md).
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test: not in -short")
	}
	onBoth(t, testChaos)
}

func testChaos(t *testing.T, b backend) {
	spec, published := scenario.Chaos(20, scenario.DirectorySink)
	e := newEnvOn(t, b, spec, map[string]string{"step.sh": scenario.ChaosStep})
	e.worker("w1", "--slots", "2")
	w2 := e.worker("w2", "--slots", "2")
	w3 := e.worker("w3", "--slots", "2")
	days := []string{"2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"}
	var runs []string
	for _, d := range days {
		runs = append(runs, e.submit(d))
	}

	reader := scenario.StartReader(e.dir, published, days)

	progress := func(n int) func(queue.RunStatus) bool {
		return func(queue.RunStatus) bool {
			done := 0
			for _, r := range runs {
				rs, err := e.st.Status(context.Background(), r)
				if err != nil {
					t.Fatal(err)
				}
				for _, ts := range rs.Tasks {
					if ts.State == queue.WorkSucceeded {
						done++
					}
				}
			}
			return done >= n
		}
	}
	e.until(runs[0], "some progress", progress(100))
	if b == onPostgres {
		w2.Signal(t, syscall.SIGSTOP)
	}
	e.until(runs[0], "more progress", progress(250))
	w3.Signal(t, syscall.SIGKILL)
	e.worker("w4", "--slots", "2")
	e.until(runs[0], "more progress still", progress(500))
	if b == onPostgres {
		w2.Signal(t, syscall.SIGCONT)
	}

	for _, r := range runs {
		rs := e.until(r, "the end of "+r, finished)
		if rs.Run.State != store.RunSucceeded {
			var bad []string
			for _, ts := range rs.Tasks {
				if ts.State != queue.WorkSucceeded {
					bad = append(bad, ts.Task+" "+ts.State+": "+ts.Reason)
				}
			}
			t.Fatalf("run %s %s: %v", r, rs.Run.State, bad)
		}
	}
	reads, readerErr := reader.Stop()
	if len(readerErr) > 0 {
		t.Fatalf("the reader saw %d bad reads of %d, first: %s", len(readerErr), reads, readerErr[0])
	}
	ctx := context.Background()
	if err := scenario.CheckVisible(ctx, e.st, e.dir, published, days); err != nil {
		t.Fatal(err)
	}
	// The chaos happened: claims of the stopped and the killed worker were
	// taken over.
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
		t.Fatal("no claim was ever taken over: the signals hit idle workers")
	}
	t.Logf("%d reads, all complete and current; %d claims taken over", reads, lost)
}
