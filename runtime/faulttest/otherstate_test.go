package faulttest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pipec/pipec/internal/scenario"
)

// TestRerunLeavesAnotherStatesTasks: two folders of one pipeline on one
// machine (a checkout and its copy, two CI jobs), each with its own state.
// pipec run in the first is killed (SIGKILL) while its charge holds, which
// goes on as an orphan; the second folder's run starts its own charge.
// The first folder's rerun ends its orphan and must leave the second's
// charge alone: both are pay/2024-01-01/r1 with the first token, and only
// the state's identity tells their processes apart. The second run then
// succeeds, its charge made once.
func TestRerunLeavesAnotherStatesTasks(t *testing.T) {
	t.Setenv("PIPEC_TEST_SECRET", scenario.MatrixSecret)
	first, second := matrixDir(t), matrixDir(t)
	crashed, _ := started(t, first, "run", "p.hcl", "--interval", "2024-01-01")
	waitForFile(t, filepath.Join(first, "held"))
	if err := crashed.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = crashed.Wait()
	other, otherOut := started(t, second, "run", "p.hcl", "--interval", "2024-01-01")
	waitForFile(t, filepath.Join(second, "held"))

	out, code := pipec(t, first, "run", "p.hcl", "--interval", "2024-01-01")
	if code != 1 || !strings.Contains(out, "process(es) it left running when its pipec died") || !strings.Contains(out, "charge UNKNOWN") {
		t.Fatalf("the rerun in the first folder: exit %d, want 1, its orphan ended, charge unknown\n%s", code, out)
	}
	if err := os.WriteFile(filepath.Join(second, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := other.Wait(); err != nil || !strings.Contains(otherOut.String(), "run pay/2024-01-01/r1 succeeded") {
		t.Fatalf("the second folder's run: %v, want it to succeed\n%s", err, otherOut)
	}
	if b, _ := os.ReadFile(filepath.Join(second, "ledger")); strings.Count(string(b), "charge ") != 1 {
		t.Fatalf("second folder's ledger %q: want one charge", b)
	}
}

// matrixDir is a new folder holding the guarantee matrix's pipeline (p.hcl,
// its charge holding until "release" exists) and its scripts.
func matrixDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := scenario.MatrixFiles()
	files["p.hcl"], files["hold"] = scenario.Matrix("1"), ""
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
