package runtime

import (
	"testing"

	"github.com/pipec/pipec/internal/goreuse"
)

// TestRunsShareTheirGoroutines runs three intervals with one
// Options.Goroutines, as a backfill does: each run leaves the goroutines it
// kept to the next, which grows no new stacks for its tasks, and the pool is
// its owner's to close.
func TestRunsShareTheirGoroutines(t *testing.T) {
	f := newFixture(t, handoffHCL, nil)
	gos := new(goreuse.Pool)
	kept := 0
	for _, day := range []string{"2024-01-01", "2024-01-02", "2024-01-03"} {
		o := f.options(day)
		o.Goroutines = gos
		if sum := f.run(o); sum.Failed {
			t.Fatalf("%s failed:\n%s", day, sum.text())
		}
		n := gos.Idle()
		if n == 0 {
			t.Fatalf("after the run of %s no goroutine is kept: the run closed a pool it does not own", day)
		}
		// The second and third runs find the first's goroutines idle: a
		// run of 4 tasks keeps a few, not a new set per run.
		if kept > 0 && n > 2*kept {
			t.Errorf("after the run of %s %d goroutines are idle, after the first %d: the runs did not reuse them", day, n, kept)
		}
		if kept == 0 {
			kept = n
		}
	}
	gos.Close()
	if n := gos.Idle(); n != 0 {
		t.Errorf("%d goroutines idle after Close", n)
	}
}
