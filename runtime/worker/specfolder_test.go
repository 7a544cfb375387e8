package worker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/runtime/store"
)

// A worker on a machine without the spec's folder (pipec submit records
// it; its share is not mounted there) says so, where it said only that
// "./hello.sh" was not found.
func TestSpecFolderNotOnTheWorker(t *testing.T) {
	e := newEnvOn(t, onSQLite, "", nil)
	specs := filepath.Join(e.dir, "specs")
	if err := os.Mkdir(specs, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := "pipeline \"away\" {\n  task \"hello\" {\n    command = [\"./hello.sh\"]\n  }\n}\n"
	if err := os.WriteFile(filepath.Join(specs, "p.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(specs, "hello.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, out := e.pipec("submit", "specs/p.hcl", "--interval", "2024-01-01", "--state", e.url); code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	if err := os.Rename(specs, specs+"-elsewhere"); err != nil {
		t.Fatal(err)
	}
	w := e.worker("w1")
	rs := e.until(e.anyRun(), "the run", finished)
	if rs.Run.State != store.RunFailed {
		t.Fatalf("run %s, want failed", rs.Run.State)
	}
	want := "could not start: the spec's folder " + specs + " is not on this machine (is its share mounted here?)"
	if !strings.Contains(rs.Tasks[0].Reason, want) || !strings.Contains(w.Output(), want) {
		t.Fatalf("hello's end %q, want %q; w1 said:\n%s", rs.Tasks[0].Reason, want, w.Output())
	}
}
