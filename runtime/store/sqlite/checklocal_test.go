package sqlite_test

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/pipec/pipec/runtime/store/sqlite"
)

// A state file on a local disk may be shared by workers; a path whose
// folder cannot be looked at is an error, not a pass.
func TestCheckLocal(t *testing.T) {
	if err := sqlite.CheckLocal(filepath.Join(t.TempDir(), "state.db")); err != nil {
		t.Fatalf("a file in the test's temporary folder: %v", err)
	}
	if err := sqlite.CheckLocal(filepath.Join(t.TempDir(), "missing", "state.db")); err == nil && runtime.GOOS == "linux" {
		t.Fatal("a missing folder was accepted")
	}
}
