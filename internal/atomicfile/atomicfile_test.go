package atomicfile

import (
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
