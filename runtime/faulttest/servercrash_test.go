package faulttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/pgtest"
	"github.com/pipec/pipec/internal/proctest"
)

// TestStateCrashAfterCharge: PostgreSQL crashes (immediate shutdown, then
// crash recovery, which takes back the last asynchronous commits) the
// moment a task that is not idempotent starts. Its start was recorded
// before its process started, synchronously, so the crash cannot take it
// back: the run rides the crash out, and no later run charges again. The
// start was an asynchronous commit before, and the next run, finding no
// start, charged a second time (3 runs of 3).
func TestStateCrashAfterCharge(t *testing.T) {
	srv := pgtest.Start(t) // its own server: this test crashes it
	url := srv.NewSchema(t)
	dir := t.TempDir()
	spec := `pipeline "crash" {
  code_version = "v1"
  task "charge" {
    command    = ["sh", "-c", "touch started; echo charged >> charges; sleep 1"]
    effects    = ["charge"]
    idempotent = false
  }
}
`
	if err := os.WriteFile(filepath.Join(dir, "pipeline.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	crashed := make(chan error, 1)
	go func() {
		if !proctest.Appears(filepath.Join(dir, "started"), time.Minute) {
			crashed <- os.ErrNotExist
			return
		}
		crashed <- srv.Crash()
	}()
	runs := []string{}
	for range 2 {
		out, code := pipec(t, dir, "run", "pipeline.hcl", "--interval", "2024-01-01", "--state", url)
		runs = append(runs, out)
		t.Logf("exit %d:\n%s", code, out)
	}
	if err := <-crashed; err != nil {
		t.Fatalf("the crash: %v", err)
	}
	charges, err := os.ReadFile(filepath.Join(dir, "charges"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(charges), "charged"); n != 1 {
		t.Fatalf("charged %d times, want once:\n%s", n, strings.Join(runs, "\n"))
	}
}
