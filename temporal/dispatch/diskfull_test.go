package dispatch_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/fulldisk"
	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/store"
)

// A Temporal worker whose disk cannot hold a task's output fails the task
// with class disk, the machine's failure: it fails over to another
// worker, as on pipec's own workers.
func TestFullDiskFailsOver(t *testing.T) {
	e := newEnv(t, scenario.FullDisk(scenario.FullDiskFailover), nil)
	dir := filepath.Join(e.dir, "work-w1")
	fulldisk.Mount(t, dir, "2m")
	fulldisk.Fill(t, dir, 500_000)
	w1 := e.worker("w1")
	code, run, out := e.submit("2024-01-01", false)
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	for deadline := time.Now().Add(time.Minute); len(e.attempts(run, "make")) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("make never started on w1:\n%s", w1.Output())
		}
	}
	e.worker("w2")
	if r := e.until(run); r.State != store.RunSucceeded {
		t.Fatalf("run %s, want succeeded\n%s", r.State, w1.Output())
	}
	if got := e.starts(run, "make"); !slices.Equal(got, []string{"w1", "w2"}) {
		t.Fatalf("make started on %v, want w1 then w2", got)
	}
	if !strings.Contains(w1.Output(), "disk: its outputs were not published: output rows of make#1 could not be frozen on this machine") {
		t.Errorf("w1 does not say why make failed there:\n%s", w1.Output())
	}
}
