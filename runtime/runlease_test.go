package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/clock"
	"github.com/pipec/pipec/runtime/exec"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

const leaseHCL = `
pipeline "lease" {
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "wait" {
    command = ["./wait.sh"]
  }
}
`

// TestRunLeaseTakenOverWhenExpired: a run whose lease on its interval
// expired (seen from a store whose clock is an hour ahead, as if its pipec
// had been stopped that long) is taken over by the next run, which abandons
// it; the old run, still alive, loses its lease at its next renewal and
// stops instead of running beside the new one.
func TestRunLeaseTakenOverWhenExpired(t *testing.T) {
	f := newFixture(t, leaseHCL, map[string]string{"wait.sh": `touch started
while [ ! -e release ]; do sleep 0.02; done`})
	oa := f.options("2024-01-01")
	oa.RunLease = 2 * time.Second
	doneA := runAsync(t, oa)
	waitFor(t, filepath.Join(f.dir, "started"))

	// While A renews, a second run on the real clock is refused.
	if _, err := Run(context.Background(), f.options("2024-01-01")); err == nil {
		t.Fatal("a second run started beside a live one")
	}

	ob := f.options("2024-01-01")
	ob.Store, ob.RunLease = f.ahead(t, time.Hour), time.Hour
	doneB := runAsync(t, ob)

	var a *Summary
	select {
	case a = <-doneA:
	case <-time.After(30 * time.Second):
		t.Fatal("the run that lost its lease did not stop")
	}
	if err := os.WriteFile(filepath.Join(f.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var b *Summary
	select {
	case b = <-doneB:
	case <-time.After(30 * time.Second):
		t.Fatal("the run that took over did not end")
	}
	if a == nil || b == nil {
		return
	}
	if !a.Failed || a.task("wait").State == TaskSucceeded || !strings.Contains(a.task("wait").Reason, "lost its lease") {
		t.Errorf("the old run went on:\n%s", a.text())
	}
	if want := "run lease/2024-01-01/r1 FAILED: "; !strings.HasPrefix(a.text(), want) {
		t.Errorf("the old run's verdict does not say why, want %q:\n%s", want, a.text())
	}
	if b.Failed || b.Run.ID != "lease/2024-01-01/r2" {
		t.Errorf("the new run:\n%s", b.text())
	}
	evs, err := f.st.Events(context.Background(), "lease/2024-01-01/r1")
	if err != nil {
		t.Fatal(err)
	}
	abandoned := false
	for _, e := range evs {
		abandoned = abandoned || e.Kind == store.EventRunAbandoned
	}
	if !abandoned {
		t.Error("the taken-over run was not recorded as abandoned")
	}
}

// TestSupersededRunSaysWhy: a run taken over while its pipec was stopped
// (Ctrl-Z, say: here a store whose clock is two hours ahead sees its
// lease expired) whose tasks all end before it next renews its lease
// learns at its end that the interval is another run's now. Its verdict
// says why it failed, where it said FAILED above a list of succeeded
// tasks and nothing else.
func TestSupersededRunSaysWhy(t *testing.T) {
	f := newFixture(t, leaseHCL, map[string]string{"wait.sh": `touch started
while [ ! -e release ]; do sleep 0.02; done`})
	oa := f.options("2024-01-01")
	oa.RunLease = time.Hour // no renewal before its task ends
	// Its task's process is another machine's to the run that takes over,
	// which leaves it alone (a stopped pipec's task may be stopped too).
	oa.Self = exec.Identity{Host: "elsewhere"}
	doneA := runAsync(t, oa)
	waitFor(t, filepath.Join(f.dir, "started"))
	ob := f.options("2024-01-01")
	ob.Store = f.ahead(t, 2*time.Hour)
	doneB := runAsync(t, ob)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if r, err := f.st.GetRun(context.Background(), "lease/2024-01-01/r1"); err == nil && r.State.Ended() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second run did not take the interval over")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a, b := <-doneA, <-doneB
	if a == nil || b == nil {
		return
	}
	if a.task("wait").State != TaskSucceeded {
		t.Fatalf("the old run's task did not end on its own:\n%s", a.text())
	}
	want := "run lease/2024-01-01/r1 FAILED: superseded by lease/2024-01-01/r2: its pipec stopped before the run finished\n"
	if !a.Failed || !strings.HasPrefix(a.text(), want) {
		t.Errorf("the old run's verdict, want %q:\n%s", want, a.text())
	}
	if b.Failed {
		t.Errorf("the new run:\n%s", b.text())
	}
}

// runAsync runs o and sends its summary (nil after an error, which fails
// t) once it ends.
func runAsync(t *testing.T, o Options) <-chan *Summary {
	done := make(chan *Summary, 1)
	go func() {
		sum, err := Run(context.Background(), o)
		if err != nil {
			t.Error(err)
		}
		done <- sum
	}()
	return done
}

// ahead opens the fixture's state as a process whose clocks, the lease
// clock too (leases are judged on it), are d ahead: it sees leases
// expired as if their holders had been stopped that long.
func (f *fixture) ahead(t *testing.T, d time.Duration) store.Store {
	now := func() time.Time { return time.Now().Add(d) }
	st, err := sqlite.Open(context.Background(), f.state, sqlite.Options{Clock: now, LeaseClock: clock.Wall(now)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// waitFor waits for a file to exist.
func waitFor(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
}
