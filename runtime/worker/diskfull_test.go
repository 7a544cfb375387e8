package worker_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pipec/pipec/internal/fulldisk"
	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// smallDisk mounts a small file system as worker name's --workdir, with
// room for what its task stages and not for the copy a freeze makes,
// and returns the file that takes the rest: removing it makes room.
func smallDisk(t *testing.T, e *env, name string) (filler string) {
	t.Helper()
	dir := filepath.Join(e.dir, "work-"+name)
	fulldisk.Mount(t, dir, "2m")
	return fulldisk.Fill(t, dir, 500_000)
}

// A worker whose disk cannot hold a task's output fails the task with
// class disk, the machine's failure and not the task's: it fails over to
// another worker, where before it failed the run as a failed check.
func TestFullDiskFailsOver(t *testing.T) {
	e := newEnvOn(t, onSQLite, scenario.FullDisk(scenario.FullDiskFailover), nil)
	smallDisk(t, e, "w1")
	w1 := e.worker("w1")
	run := e.submit("2024-01-01")
	e.until(run, "make's start on w1", func(queue.RunStatus) bool { return len(e.attempts(run, "make")) > 0 })
	e.worker("w2")
	if rs := e.until(run, "the run", finished); rs.Run.State != store.RunSucceeded {
		t.Fatalf("run %s, want succeeded: %+v", rs.Run.State, rs)
	}
	if got := e.starts(run, "make"); !slices.Equal(got, []string{"w1", "w2"}) {
		t.Fatalf("make started on %v, want w1 then w2", got)
	}
	// The visit that failed over does not speak for the task.
	if _, out := e.pipec("status", "pipeline.hcl", "--state", e.url); !regexp.MustCompile(`(?m)^  make +succeeded +attempts 2 `).MatchString(out) {
		t.Errorf("pipec status does not show make succeeded on its second attempt:\n%s", out)
	}
	if !strings.Contains(w1.Output(), "failed on w1 (disk: its outputs were not published: output rows of make#1 could not be frozen on this machine") ||
		!strings.Contains(w1.Output(), "no space left on device") {
		t.Errorf("w1 does not say why make failed there:\n%s", w1.Output())
	}
}

// The output of a task that is not run again, which a worker's full disk
// kept from being frozen, is left staged there (output.left), and its
// readers are not run; once the disk has room, the next visit on that
// worker audits and publishes it, without running the task again.
func TestFullDiskLeavesANonIdempotentOutput(t *testing.T) {
	e := newEnvOn(t, onSQLite, scenario.FullDisk(scenario.FullDiskNotIdempotent), nil)
	filler := smallDisk(t, e, "w1")
	e.worker("w1")
	run := e.submit("2024-01-01")
	rs := e.until(run, "the run", finished)
	if rs.Run.State != store.RunFailed {
		t.Fatalf("run %s, want failed", rs.Run.State)
	}
	if as := e.attempts(run, "make"); len(as) != 1 || rs.Tasks[0].Task != "make" || !strings.HasPrefix(rs.Tasks[0].Reason, runtime.ClassDisk+": ") {
		t.Fatalf("make's attempts %+v, its end %+v: want one attempt, failed with class disk", as, rs.Tasks[0])
	}
	if n := e.events(run, store.EventOutputLeft, "make"); n != 1 {
		t.Fatalf("%d output.left events of make, want 1", n)
	}
	if as := e.attempts(run, "use"); len(as) != 0 {
		t.Fatalf("use ran on what make did not get accepted: %+v", as)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	again := e.submit("2024-01-01")
	if rs := e.until(again, "the second run", finished); rs.Run.State != store.RunSucceeded {
		t.Fatalf("the run after the disk had room: %s, want succeeded: %+v", rs.Run.State, rs)
	}
	if n := e.lines("ledger", "made"); n != 1 {
		t.Fatalf("make ran %d times, want once", n)
	}
}
