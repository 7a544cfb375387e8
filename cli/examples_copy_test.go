package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/internal/tracked"
)

// TestExampleCopyAfterMainJob: a test that copies an example gets the
// repository's files, not the state and sink data the README's main job
// left beside the spec; a run of the copy on a state of its own publishes
// (a copied warehouse/ would be bound to the main job's state and refuse).
func TestExampleCopyAfterMainJob(t *testing.T) {
	clone := t.TempDir()
	tracked.Copy(t, filepath.Join("..", "examples", "orders"), filepath.Join(clone, "examples", "orders"))
	tracked.InitRepo(t, clone)
	// The main job, in the clone.
	mainSpec := filepath.Join(clone, "examples", "orders", "pipeline.hcl")
	if code, out, errs := pipecIn(t, nil, "run", mainSpec, "--interval", "2024-01-01"); code != 0 {
		t.Fatalf("main job: exit %d\n%s\n%s", code, out, errs)
	}
	for _, left := range []string{".pipec", "warehouse"} {
		if _, err := os.Stat(filepath.Join(clone, "examples", "orders", left)); err != nil {
			t.Fatalf("the main job left no %s: %v", left, err)
		}
	}

	dir := t.TempDir()
	tracked.Copy(t, filepath.Join(clone, "examples", "orders"), dir)
	for _, left := range []string{".pipec", "warehouse"} {
		if _, err := os.Stat(filepath.Join(dir, left)); err == nil {
			t.Errorf("the copy has the main job's %s", left)
		}
	}
	state := filepath.Join(t.TempDir(), "state.db")
	code, out, errs := pipecIn(t, nil, "run", filepath.Join(dir, "pipeline.hcl"), "--interval", "2024-01-01", "--state", state)
	if code != 0 || !strings.Contains(out, "won") {
		t.Fatalf("run of the copy: exit %d\n%s\n%s", code, out, errs)
	}
}
