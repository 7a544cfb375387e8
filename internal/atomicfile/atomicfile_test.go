package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// MkdirAll makes the missing folders of a path, again is a no-op, and
// refuses a path whose end is a file.
func TestMkdirAll(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b", "c")
	for range 2 {
		if err := MkdirAll(dir); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Fatalf("%s: %v", dir, err)
		}
	}
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(file); err == nil {
		t.Error("a file was taken for a folder")
	}
}

// Create writes a file that is not there, and leaves one that is as it was.
func TestCreate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "owner.json")
	if err := Create(p, []byte("first"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Create(p, []byte("second"), 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a second create: %v, want fs.ErrExist", err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "first" {
		t.Fatalf("%s holds %q (%v), want the first content", p, b, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
