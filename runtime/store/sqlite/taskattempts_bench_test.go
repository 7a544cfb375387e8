package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
)

// BenchmarkTaskAttempts is the read every task's visit makes of its own
// earlier attempts, in a run of 1,000 tasks that already has an attempt
// each (the end of a 1,000-task run: the dearest read of it).
func BenchmarkTaskAttempts(b *testing.B) {
	s := openTest(b, filepath.Join(b.TempDir(), "state.db"), nil)
	run := newRun(b, s, "2024-01-01")
	ctx := context.Background()
	res := store.FenceResource("orders", "2024-01-01")
	for i := 0; i < 1000; i++ {
		if _, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: fmt.Sprintf("t%d", i), Resource: res, Lease: time.Minute}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		as, err := s.TaskAttempts(ctx, res, fmt.Sprintf("t%d", i%1000))
		if err != nil || len(as) != 1 {
			b.Fatal(len(as), err)
		}
	}
}
