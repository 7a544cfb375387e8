package runtime

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

const handoffHCL = `
pipeline "hand" {
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "a" {
    command = ["true"]
  }
  task "b" {
    command    = ["true"]
    depends_on = ["a"]
  }
  task "c" {
    command    = ["sleep", "0.5"]
    depends_on = ["a"]
  }
  task "d" {
    command    = ["true"]
    depends_on = ["b", "c"]
  }
}
`

// handoffs records the store's FinishAndStart calls: whose end, whose starts.
type handoffs struct {
	*sqlite.Store
	mu    sync.Mutex
	calls map[string][]string
}

func (h *handoffs) FinishAndStart(ctx context.Context, ref store.AttemptRef, o store.Outcome, next []store.AttemptSpec) ([]store.Started, error) {
	h.mu.Lock()
	for _, s := range next {
		h.calls[ref.Task] = append(h.calls[ref.Task], s.Task)
	}
	h.mu.Unlock()
	return h.Store.FinishAndStart(ctx, ref, o, next)
}

// TestEndStartsDependents: a task's end starts, in the same store write,
// the attempts of the tasks that waited for it alone; every task then runs
// once, with the attempt it was handed.
func TestEndStartsDependents(t *testing.T) {
	f := newFixture(t, handoffHCL, nil)
	h := &handoffs{Store: f.st, calls: map[string][]string{}}
	o := f.options("2024-01-01")
	o.Store = h
	// b and c run at once, and b ends long before c: a slot is free again
	// as soon as a process exits, before its task's end is recorded, so
	// two tasks that end together may each find the other still running,
	// and neither hands d over (d then starts the usual way).
	o.Parallel = 2
	sum := f.run(o)
	if sum.Failed {
		t.Fatalf("run failed:\n%s", sum.text())
	}
	got := slices.Sorted(slices.Values(h.calls["a"]))
	if !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("a's end started %v, want [b c]", got)
	}
	// d waits for b and c: the second of them to end (c) starts it.
	if len(h.calls["b"]) != 0 || !slices.Equal(h.calls["c"], []string{"d"}) {
		t.Errorf("ends of b and c started %v and %v, want nothing and d", h.calls["b"], h.calls["c"])
	}
	as, err := f.st.Attempts(context.Background(), sum.RunID)
	if err != nil || len(as) != 4 {
		t.Fatalf("attempts = %+v, %v; want one per task", as, err)
	}
	for _, a := range as {
		if a.State != store.AttemptSucceeded || a.Number != 1 || a.PID == 0 {
			t.Errorf("attempt %+v", a)
		}
	}
}

// TestHandedStartInterrupted: a run stopped right after a task's end
// started its dependents' attempts ends those attempts as never started
// (not left queued), and the dependents are not run.
func TestHandedStartInterrupted(t *testing.T) {
	f := newFixture(t, handoffHCL, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := f.options("2024-01-01")
	o.Parallel = 1
	o.OnEvent = func(ev Event) {
		if ev.Task == "a" && ev.Kind == store.EventAttemptFinished {
			cancel()
		}
	}
	sum, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"b", "c"} {
		if st := sum.task(name); st.State != TaskNotRun || st.Reason != interrupted {
			t.Errorf("%s: %+v, want not run: %s", name, st, interrupted)
		}
		as, err := f.st.TaskAttempts(context.Background(), store.FenceResource("hand", "2024-01-01"), name)
		if err != nil || len(as) != 1 || as[0].State != store.AttemptFailed || as[0].Class != queue.ClassNotStarted {
			t.Errorf("attempts of %s = %+v, %v; want one, failed %s", name, as, err, queue.ClassNotStarted)
		}
	}
}
