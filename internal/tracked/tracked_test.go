package tracked

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// leftovers writes what a run, the tour and a user leave beside a spec.
func leftovers(t *testing.T, dir string) {
	t.Helper()
	for _, name := range []string{".pipec/state.db", "warehouse/orders/2024-01-01/orders_clean.csv", "marts/x.csv", "orders.svg"} {
		write(t, filepath.Join(dir, name), "state")
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFilesInCheckout: in a git checkout only tracked files count: not the
// state, sink data and graph a run and the tour leave, nor an untracked
// scratch file; a tracked file deleted from the working tree is skipped.
func TestFilesInCheckout(t *testing.T) {
	repo := t.TempDir()
	write(t, filepath.Join(repo, "examples/orders/pipeline.hcl"), "pipeline")
	write(t, filepath.Join(repo, "examples/orders/extract.sh"), "#!/bin/sh")
	write(t, filepath.Join(repo, "examples/orders/gone.sh"), "#!/bin/sh")
	write(t, filepath.Join(repo, "examples/orders/sub/data.csv"), "a,b")
	InitRepo(t, repo)
	os.Remove(filepath.Join(repo, "examples/orders/gone.sh"))
	leftovers(t, filepath.Join(repo, "examples/orders"))
	write(t, filepath.Join(repo, "examples/orders/scratch.hcl"), "mine")

	got, err := Files(filepath.Join(repo, "examples", "orders"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"extract.sh", "pipeline.hcl", "sub/data.csv"}; !slices.Equal(got, want) {
		t.Errorf("Files = %q, want %q", got, want)
	}

	dst := t.TempDir()
	Copy(t, filepath.Join(repo, "examples"), dst)
	for _, name := range []string{"orders/.pipec", "orders/warehouse", "orders/marts", "orders/orders.svg", "orders/scratch.hcl"} {
		if _, err := os.Lstat(filepath.Join(dst, name)); err == nil {
			t.Errorf("Copy copied %s", name)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "orders/sub/data.csv")); err != nil {
		t.Errorf("Copy left out a tracked file: %v", err)
	}
	if got := Glob(t, repo, "examples/*/*.hcl"); !slices.Equal(got, []string{filepath.Join(repo, "examples/orders/pipeline.hcl")}) {
		t.Errorf("Glob = %q", got)
	}
}

// TestFilesOutsideCheckout: without git the filter skips what pipec and the
// tour write.
func TestFilesOutsideCheckout(t *testing.T) {
	dir := t.TempDir()
	if _, err := Git(dir, "rev-parse", "--git-dir"); err == nil {
		t.Skip("the temporary folder is inside a git checkout")
	}
	write(t, filepath.Join(dir, "pipeline.hcl"), "pipeline")
	write(t, filepath.Join(dir, "extract.sh"), "#!/bin/sh")
	leftovers(t, dir)
	got, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"extract.sh", "pipeline.hcl"}; !slices.Equal(got, want) {
		t.Errorf("Files = %q, want %q", got, want)
	}
}
