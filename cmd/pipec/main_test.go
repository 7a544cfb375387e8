package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMain makes the test binary pipec itself when PIPEC_TEST_MAIN is set, so
// the tests below run the real main (signal handling included) as a child
// process.
func TestMain(m *testing.M) {
	if os.Getenv("PIPEC_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// pipec prepares the test binary as pipec in dir.
func pipec(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PIPEC_TEST_MAIN=1", "NO_COLOR=1")
	return cmd
}

// exitCode is the child's exit code; -1 when a signal killed it.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// closedPipe returns the write end of a pipe whose reader has already gone,
// as `pipec ... | head -1` leaves it once head exits.
func closedPipe(t *testing.T) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() { w.Close() })
	return w
}

const quickSpec = `pipeline "p" {
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "a" {
    command = ["true"]
  }
}
`

// TestClosedPipeIsQuiet: a reader that goes away costs pipec its output, not
// its exit code or a "broken pipe" message; `pipec run --json | head -1`
// still finishes and records the run.
func TestClosedPipeIsQuiet(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.hcl"), []byte(quickSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.hcl"), []byte("pipeline \"b\" {\n  task \"x\" {\n    command = [\"true\"]\n    inputs = [\"nothing\"]\n  }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"run", "p.hcl", "--interval", "2024-01-01", "--json"}, 0},
		{[]string{"lint", "--format", "json", "bad.hcl"}, 1},
		{[]string{"explain", "cycle"}, 0},
	} {
		cmd := pipec(t, dir, tc.args...)
		cmd.Stdout = closedPipe(t)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		code := exitCode(t, cmd.Run())
		if code != tc.code || stderr.Len() != 0 {
			t.Errorf("pipec %s | (closed): exit %d, stderr %q; want exit %d and nothing on stderr",
				strings.Join(tc.args, " "), code, stderr.String(), tc.code)
		}
	}
	out, err := pipec(t, dir, "status").Output()
	if err != nil || !strings.Contains(string(out), "succeeded") {
		t.Errorf("the run behind the closed pipe was not recorded as succeeded: %v\n%s", err, out)
	}
}

// TestCtrlCExits130 interrupts a run while its task sleeps: pipec stops the
// task, records the run, says so, and exits 130 like a shell's Ctrl-C.
func TestCtrlCExits130(t *testing.T) {
	dir := t.TempDir()
	spec := strings.Replace(quickSpec, `command = ["true"]`, `command = ["sleep", "60"]`+"\n    timeout = \"5m\"", 1)
	if err := os.WriteFile(filepath.Join(dir, "p.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := pipec(t, dir, "run", "p.hcl", "--interval", "2024-01-01", "--json")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait (on output, not on time) until the task is running.
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"attempt.running"`) {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
	}
	code := exitCode(t, cmd.Wait())
	if code != 130 || !strings.Contains(stderr.String(), "pipec: interrupted") {
		t.Errorf("exit %d, stderr %q; want 130 and \"pipec: interrupted\"", code, stderr.String())
	}
	out, err := pipec(t, dir, "status").Output()
	if err != nil || !strings.Contains(string(out), "failed") {
		t.Errorf("the interrupted run was not recorded: %v\n%s", err, out)
	}
}

// TestTasksGetDefaultSIGPIPE: pipec survives closed pipes by watching
// SIGPIPE, not by ignoring it, because an ignored signal stays ignored in
// the tasks it starts (a task's `yes | head -1` would then never end cleanly).
func TestTasksGetDefaultSIGPIPE(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc")
	}
	dir := t.TempDir()
	spec := strings.Replace(quickSpec, `command = ["true"]`, `command = ["sh", "-c", "grep SigIgn /proc/self/status"]`, 1)
	if err := os.WriteFile(filepath.Join(dir, "p.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := pipec(t, dir, "run", "p.hcl", "--interval", "2024-01-01")
	cmd.Stdout = closedPipe(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); exitCode(t, err) != 0 {
		t.Fatalf("run failed: %s", stderr.String())
	}
	logs, _ := filepath.Glob(filepath.Join(dir, ".pipec", "logs", "*", "*", "*", "a", "1.log"))
	if len(logs) != 1 {
		t.Fatalf("task log not found: %v", logs)
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	var mask uint64
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "SigIgn:\t%x", &mask); err != nil {
		t.Fatalf("cannot read %q: %v", b, err)
	}
	if mask&(1<<(uint(syscall.SIGPIPE)-1)) != 0 {
		t.Errorf("the task starts with SIGPIPE ignored (SigIgn %x)", mask)
	}
}
