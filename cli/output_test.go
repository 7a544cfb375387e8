package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var ordersSpec = filepath.Join("..", "examples", "orders", "pipeline.hcl")

// plan is what compile prints for the orders example.
func plan(t *testing.T) string {
	t.Helper()
	code, out, errs := pipecIn(t, nil, "compile", ordersSpec)
	if code != 0 {
		t.Fatalf("compile: exit %d\n%s", code, errs)
	}
	return out
}

// TestOutputDevice: -o on a device writes to it and leaves it a device (as
// root, -o /dev/null used to replace /dev/null with a regular file). As root
// the test writes to a null device it makes in a temporary folder, so a
// regression cannot destroy the machine's /dev/null.
func TestOutputDevice(t *testing.T) {
	dev := "/dev/null"
	if os.Geteuid() == 0 {
		dev = filepath.Join(t.TempDir(), "null")
		if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Skipf("cannot make a device node: %v", err)
		}
	}
	code, out, errs := pipecIn(t, nil, "compile", ordersSpec, "-o", dev)
	if code != 0 || out != "" {
		t.Fatalf("compile -o %s: exit %d\n%s\n%s", dev, code, out, errs)
	}
	st, err := os.Lstat(dev)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("compile -o %s replaced the device: mode %v", dev, st.Mode())
	}
}

// TestOutputFIFO: -o on a named pipe feeds its reader and leaves the pipe.
func TestOutputFIFO(t *testing.T) {
	want := plan(t)
	fifo := filepath.Join(t.TempDir(), "plan.pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	got := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(fifo) // blocks until a writer opens the pipe
		got <- string(b)
	}()
	code, _, errs := pipecIn(t, nil, "compile", ordersSpec, "-o", fifo)
	if code != 0 {
		t.Fatalf("compile -o FIFO: exit %d\n%s", code, errs)
	}
	select {
	case b := <-got:
		if b != want {
			t.Errorf("the reader got %d bytes, want the plan's %d", len(b), len(want))
		}
	case <-time.After(10 * time.Second):
		// Unblock the reader before failing.
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Error("nothing was written to the pipe")
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the pipe was replaced: %v, %v", st.Mode(), err)
	}
}

// TestOutputFolder: -o naming a folder is a usage error that says so, and
// the folder is untouched.
func TestOutputFolder(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := pipecIn(t, nil, "compile", ordersSpec, "-o", dir)
	if code != 2 || out != "" || !strings.Contains(errs, dir+" is a folder") {
		t.Fatalf("compile -o FOLDER: exit %d\n%s\n%s", code, out, errs)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the folder got %d entries", len(ents))
	}
}

// TestOutputRegularFile: a file is replaced (keeping its mode, leaving no
// temporary file); a link to a file stays a link and its target gets the
// plan; a missing folder is a usage error naming the path.
func TestOutputRegularFile(t *testing.T) {
	want := plan(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(file, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink("plan.json", link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{file, link} {
		os.WriteFile(file, []byte("old"), 0o600)
		if code, _, errs := pipecIn(t, nil, "compile", ordersSpec, "-o", path); code != 0 {
			t.Fatalf("compile -o %s: exit %d\n%s", path, code, errs)
		}
		if b, _ := os.ReadFile(file); string(b) != want {
			t.Errorf("-o %s: %s does not hold the plan", path, file)
		}
		if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
			t.Errorf("-o %s: mode %v, want the file's 0600", path, st.Mode().Perm())
		}
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("the folder holds %d entries, want the file and the link", len(ents))
	}
	missing := filepath.Join(dir, "no", "plan.json")
	code, _, errs := pipecIn(t, nil, "compile", ordersSpec, "-o", missing)
	if code != 2 || !strings.Contains(errs, missing+": cannot write") || strings.Contains(errs, ".tmp") {
		t.Errorf("compile -o MISSING/FILE: exit %d\n%s", code, errs)
	}
}

// TestFmtKeepsLink: fmt rewrites a linked spec's target and keeps the link
// (it used to replace the link with a regular file).
func TestFmtKeepsLink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.hcl")
	if err := os.WriteFile(real, []byte("pipeline \"p\" {\ntask \"a\" {\ncommand = [\"true\"]\n}\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "spec.hcl")
	if err := os.Symlink("real.hcl", link); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := pipecIn(t, nil, "fmt", link); code != 0 {
		t.Fatalf("fmt: exit %d\n%s", code, errs)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("fmt replaced the link: %v", err)
	}
	if b, _ := os.ReadFile(real); !strings.Contains(string(b), "  task \"a\" {") {
		t.Errorf("fmt did not format the link's target:\n%s", b)
	}
}
