// Package fulldisk gives a test a folder on a file system of its own,
// small and then full, so that pipec meets a real ENOSPC: a tmpfs mounted
// there, which needs root. A test skips where it cannot mount one, and
// fails with PIPEC_REQUIRE_MOUNT=1 (CI), where a skip would hide the test.
package fulldisk

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// RequireEnv makes a folder that cannot be mounted a failure.
const RequireEnv = "PIPEC_REQUIRE_MOUNT"

// Mount mounts a tmpfs of size (as mount takes it: "1m") on dir, which
// it creates, keeping what dir held (copied in), and unmounts it when the
// test ends.
func Mount(t testing.TB, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	held := t.TempDir()
	if out, err := exec.Command("cp", "-a", dir+"/.", held).CombinedOutput(); err != nil {
		t.Fatalf("keeping what %s holds: %v\n%s", dir, err, out)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("a small tmpfs is required (%s=1) but cannot be mounted: %v\n%s", RequireEnv, err, out)
		}
		t.Skipf("a full disk needs a small tmpfs, which cannot be mounted here (not root?): %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
		}
	})
	if out, err := exec.Command("cp", "-a", held+"/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("putting back what %s held: %v\n%s", dir, err, out)
	}
}

// Fill writes the file name in dir until its file system has no room
// left but n bytes (or none), and returns its path: removing it makes
// the room again.
func Fill(t testing.TB, dir string, n int64) string {
	t.Helper()
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	left := int64(fs.Bavail)*int64(fs.Bsize) - n
	block := make([]byte, 4096)
	for ; left > 0; left -= int64(len(block)) {
		if _, err := f.Write(block[:min(int64(len(block)), left)]); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	return path
}
