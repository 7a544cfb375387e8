package dispatch_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/store"
)

// A Temporal worker stopped while it audits a non-idempotent task's
// output leaves it for the next visit, as pipec's workers do: that visit,
// on the same worker back under its name or on another that never saw the
// first one's folder, audits the output from the shared artifact store and
// publishes it, and the task is charged once.
func TestLeftOutputAuditedByTheNextVisit(t *testing.T) {
	for _, next := range []string{"w1", "w2"} {
		t.Run("on "+next, func(t *testing.T) {
			e := newEnv(t, scenario.LeftOutput, scenario.LeftOutputFiles())
			w1 := e.worker("w1")
			_, run, _ := e.submit("2024-01-01", false)
			e.waitFile("auditing")
			interrupt(t, w1)
			if next != "w1" {
				// The first worker's folder is gone with its machine.
				if err := os.RemoveAll(filepath.Join(e.dir, "work-w1")); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			w := e.worker(next)
			if r := e.until(run); r.State != store.RunSucceeded {
				t.Fatalf("run %s, want succeeded: %+v\n%s", r.State, e.status("pay", "2024-01-01"), w.Output())
			}
			e.chargedOnce(t)
			if n := e.lines("audits", "audit"); n != 2 {
				t.Errorf("%d audits, want 2 (the stopped one, and the next visit's)", n)
			}
		})
	}
}

// A Temporal worker stopped once a non-idempotent task's process has
// exited, before its output went into the shared artifact store, still
// puts the output there and records it, as pipec's workers do: the next
// visit, on a worker that never saw the first one's folder, audits and
// publishes the receipt, and the task is charged once. Before, the run
// failed ("not staged any more") until --force charged again.
func TestStoppedOnceTheChargeExited(t *testing.T) {
	e := newEnv(t, scenario.LeftOutput, scenario.LeftOutputFiles())
	if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w1 := e.workerEnv(bin, []string{"PIPEC_TEST_TERM_AFTER_EXIT=charge"}, "w1")
	_, run, _ := e.submit("2024-01-01", false)
	<-w1.Done
	if err := os.RemoveAll(filepath.Join(e.dir, "work-w1")); err != nil {
		t.Fatal(err)
	}
	w2 := e.worker("w2")
	if r := e.until(run); r.State != store.RunSucceeded {
		t.Fatalf("run %s, want succeeded: %+v\n%s\n%s", r.State, e.status("pay", "2024-01-01"), w1.Output(), w2.Output())
	}
	e.chargedOnce(t)
}

// chargedOnce fails t unless scenario.LeftOutput charged once, on w1, its
// receipt is what the warehouse shows, and mail ran once.
func (e *env) chargedOnce(t *testing.T) {
	t.Helper()
	if n := e.lines("ledger", "charge"); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
	got, err := os.ReadFile(filepath.Join(e.dir, "warehouse", "2024-01-01", "data.csv"))
	if err != nil || string(got) != "id,worker\n1,w1\n" {
		t.Fatalf("published %q (%v), want the charge's receipt", got, err)
	}
	if n := e.lines("mails", "mail"); n != 1 {
		t.Fatalf("%d mails, want 1", n)
	}
}
