package runtime

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
)

// What an orphan staged under an older pipec's layout
// (sink.LegacyStagingPath) is found, audited and published once its attempt
// is resolved as succeeded, as what it stages now is.
func TestLegacyStagingIsAdopted(t *testing.T) {
	f := newFixture(t, `pipeline "pay" {
  task "charge" {
    command    = ["./charge.sh"]
    effects    = ["charge"]
    idempotent = false
    outputs    = ["receipts"]
  }
  sink "out" {
    type    = "directory"
    path    = "out"
    fencing = "token"
  }
  publish "receipts_pub" {
    artifact = "receipts"
    sink     = "out"
  }
}`, map[string]string{"charge.sh": `echo charge >> ledger`})
	a := crashedRun(t, f, true)
	staging, err := sink.LegacyStagingPath(filepath.Join(f.dir, ".pipec", "staging"), a.Run, "charge", a.Number, "receipts")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(staging, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(staging, "r.csv"), []byte("id\n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if sum := f.run(f.options("2024-01-01")); !sum.Failed || sum.task("charge").State != TaskUnknown {
		t.Fatalf("before resolve:\n%s", sum.text())
	}
	if _, err := f.st.ResolveAttempt(context.Background(), a.AttemptRef, store.AttemptSucceeded, "the ledger has it", "test"); err != nil {
		t.Fatal(err)
	}
	sum := f.run(f.options("2024-01-01"))
	if sum.Failed || sum.task("charge").State != TaskReused || len(sum.Publish) != 1 || sum.Publish[0].Outcome != "won" {
		t.Fatalf("after resolve:\n%s", sum.text())
	}
	if b, err := os.ReadFile(filepath.Join(f.dir, "out", "2024-01-01", "r.csv")); err != nil || string(b) != "id\n1\n" {
		t.Errorf("published %q, %v", b, err)
	}
}
