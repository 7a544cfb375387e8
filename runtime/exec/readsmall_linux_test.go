//go:build linux

package exec

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestReadSmall: a file past the first buffer is read whole, /proc entries
// (which report size 0) too, and a missing file is fs.ErrNotExist as with
// os.ReadFile.
func TestReadSmall(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	want := bytes.Repeat([]byte("0123456789"), 500)
	if err := os.WriteFile(p, want, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := readSmall(p); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("readSmall = %d bytes, %v", len(got), err)
	}
	want, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readSmall("/proc/self/status"); err != nil || len(got) == 0 || !bytes.HasPrefix(got, []byte("Name:")) {
		t.Fatalf("readSmall(/proc/self/status) = %q, %v (os.ReadFile: %d bytes)", got, err, len(want))
	}
	if _, err := readSmall(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}
