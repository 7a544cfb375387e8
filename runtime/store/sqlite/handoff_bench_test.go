package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
)

// BenchmarkTaskWritesHandedOff is BenchmarkTaskWrites for a chain of tasks
// whose every end starts the next one (FinishAndStart): one transaction a
// task instead of two.
func BenchmarkTaskWritesHandedOff(b *testing.B) {
	s := openTest(b, filepath.Join(b.TempDir(), "state.db"), nil)
	run := newRun(b, s, "2024-01-01")
	ctx := context.Background()
	res := store.FenceResource("bench", "2024-01-01")
	spec := func(i int) store.AttemptSpec {
		return store.AttemptSpec{Run: run.ID, Task: fmt.Sprintf("t%d", i), Resource: res, Host: "h", Boot: "b", Lease: time.Minute, Queued: true}
	}
	a, err := s.StartAttempt(ctx, spec(0))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ran := &store.Running{Process: store.Process{Host: "h", Boot: "b", PID: 1000 + i, PGID: 1000 + i, Start: uint64(i)},
			Lease: time.Minute}
		started, err := s.FinishAndStart(ctx, a.AttemptRef, store.Outcome{State: store.AttemptSucceeded, Ran: ran, Was: &a},
			[]store.AttemptSpec{spec(i + 1)})
		if err != nil || started[0].Err != nil {
			b.Fatal(err, started)
		}
		a = started[0].Attempt
	}
}
