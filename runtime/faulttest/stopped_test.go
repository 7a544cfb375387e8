package faulttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime"
)

// TestStoppedRunResumedAfterTakeover: pipec run is stopped (SIGSTOP: Ctrl-Z,
// a frozen VM) while a non-idempotent task runs (the guarantee matrix's
// charge, holding); the task ends meanwhile.
// The next run, once the stopped run's lease on the interval expired, takes
// the interval over and cannot know whether the charge happened (unknown).
// The stopped run, continued, finds its lease lost and stops, recording what
// it saw of the charge: it succeeded, its receipt staged. The run after both
// adopts the charge and accepts and publishes its receipt, pipec gc run
// in between: nothing charged twice, nothing lost.
//
// Before, the continued run said the state database had failed ("context
// canceled") and lost the receipt (frozen, never recorded, its staging
// gone): every later run failed, "not staged any more", until a --force
// charged again.
func TestStoppedRunResumedAfterTakeover(t *testing.T) {
	dir := matrixDir(t)
	t.Setenv("PIPEC_TEST_SECRET", scenario.MatrixSecret)
	first, firstOut := started(t, dir, "run", "p.hcl", "--interval", "2024-01-01")
	waitForFile(t, filepath.Join(dir, "held")) // charged, and holding

	if err := first.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer first.Process.Signal(syscall.SIGCONT)
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(runtime.DefaultRunLease + time.Second)

	out, code := pipec(t, dir, "run", "p.hcl", "--interval", "2024-01-01")
	if code != 1 || !strings.Contains(out, "superseded") && !strings.Contains(out, "never finished") || !strings.Contains(out, "charge UNKNOWN") {
		t.Fatalf("the run that took over: exit %d, want 1 with charge unknown\n%s", code, out)
	}
	if err := first.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	err := first.Wait()
	said := firstOut.String()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(said, "lost its lease on interval 2024-01-01") {
		t.Fatalf("the continued run: %v, want exit 1 saying it lost its lease\n%s", err, said)
	}
	for _, wrong := range []string{"state database", "context canceled", "REJECTED"} {
		if strings.Contains(said, wrong) {
			t.Errorf("the continued run says %q: it was taken over, nothing failed\n%s", wrong, said)
		}
	}

	// pipec gc in between keeps the staging the next run audits.
	if out, code := pipec(t, dir, "gc", "--state", filepath.Join(".pipec", "state.db")); code != 0 {
		t.Fatalf("pipec gc: exit %d\n%s", code, out)
	}
	out, code = pipec(t, dir, "run", "p.hcl", "--interval", "2024-01-01")
	if code != 0 || !strings.Contains(out, "charge not run again: attempt 1 of pay/2024-01-01/r1 succeeded") {
		t.Fatalf("the run after both: exit %d, want 0 adopting the charge\n%s", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "ledger")); strings.Count(string(b), "charge ") != 1 {
		t.Fatalf("ledger %q: want one charge", b)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "warehouse", "2024-01-01", "r.csv")); err != nil || string(b) != "id\n1\n" {
		t.Fatalf("published receipt %q (%v), want the charge's", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "mails")); string(b) != "mail pay/2024-01-01/r3\n" {
		t.Fatalf("mails %q: want one", b)
	}
}

// waitForFile waits for path to exist.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
	}
}
