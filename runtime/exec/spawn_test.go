//go:build linux

package exec

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A process that escaped the group (a new session) and holds the output
// open does not hold the task: its output is read for drainWait after the
// task's exit, then the task is over.
func TestOutputHeldOpenByAnEscapee(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid is not installed:", err)
	}
	dir := t.TempDir()
	script(t, dir, "task.sh", `setsid sh -c 'echo $$ > escapee.pid; echo from the escapee; exec sleep 60' &
while [ ! -s escapee.pid ]; do sleep 0.01; done
echo from the task`)
	start := time.Now()
	p, err := Start(context.Background(), Spec{Argv: []string{"./task.sh"}, Dir: dir, Env: env()})
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	select {
	case <-p.Done():
		r = p.Wait()
	case <-time.After(30 * time.Second):
		t.Fatal("the task is held by a process outside its group")
	}
	escapee := readPID(t, filepath.Join(dir, "escapee.pid"))
	t.Cleanup(func() { _ = syscall.Kill(escapee, syscall.SIGKILL) })
	if !r.Success() || r.Leftovers {
		t.Errorf("result = %+v", r)
	}
	if !strings.Contains(r.Tail, "from the escapee\n") || !strings.Contains(r.Tail, "from the task\n") {
		t.Errorf("tail = %q", r.Tail)
	}
	if syscall.Kill(escapee, 0) != nil {
		t.Errorf("the escapee %d is gone before the end of its sleep", escapee)
	}
	if d := time.Since(start); d < drainWait {
		t.Errorf("the task ended after %v, before the output was waited for (%v)", d, drainWait)
	}
}

// A variable set twice reaches the child once, with its last value, as
// os/exec gave it.
func TestEnvLastWins(t *testing.T) {
	p, err := Start(context.Background(), Spec{Argv: []string{"sh", "-c", `echo "$A"; env | grep -c '^A='`},
		Dir: t.TempDir(), Env: append(env(), "A=first", "B=b", "A=last")})
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Wait(); !r.Success() || r.Tail != "last\n1\n" {
		t.Errorf("result = %+v", r)
	}
	for _, c := range []struct{ env, want string }{
		{"A=1 B=2", "A=1 B=2"},
		{"B=2 A=1", "B=2 A=1"},
		{"A=1 A=2 B=3", "A=2 B=3"}, // sorted, one variable twice
		{"A0=x A=1 A=2", "A0=x A=2"},
		{"B=1 A=2 B=3", "A=2 B=3"},
	} {
		if got := strings.Join(dedupEnv(strings.Fields(c.env)), " "); got != c.want {
			t.Errorf("dedupEnv(%s) = %s, want %s", c.env, got, c.want)
		}
	}
}

// Without a pidfd (a kernel before 5.3) the exit is seen by a goroutine
// that waits without reaping: the output and the status are the same.
func TestExitSeenWithoutPidfd(t *testing.T) {
	c, err := spawn("/bin/sh", Spec{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, Dir: t.TempDir(), Env: env()})
	if err != nil {
		t.Fatal(err)
	}
	if c.exitFD >= 0 {
		syscall.Close(c.exitFD)
		c.exitFD = -1
	}
	if err := c.watchBy(func() { waitExited(c.pid) }); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	buf := make([]byte, 4)
	c.copyUntilExit(&out, buf)
	ws, err := c.reap()
	c.drain(&out, buf, drainWait)
	c.close()
	if err != nil || ws.ExitStatus() != 3 {
		t.Errorf("status %v, %v; want exit 3", ws.ExitStatus(), err)
	}
	if out.String() != "out\nerr\n" {
		t.Errorf("output = %q", out.String())
	}
}

// TestNullFileKeepsNoFailure: a descriptor that could not be opened is
// opened at the next ask, and one that was is kept.
func TestNullFileKeepsNoFailure(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "null")
	n := nullFile{path: missing, opened: -1}
	if fd, err := n.fd(); err == nil || fd != -1 {
		t.Fatalf("fd of a missing file: %d, %v", fd, err)
	}
	if err := os.WriteFile(missing, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := n.fd()
	if err != nil || fd < 0 {
		t.Fatalf("fd once the file exists: %d, %v", fd, err)
	}
	defer syscall.Close(fd)
	if again, err := n.fd(); err != nil || again != fd {
		t.Fatalf("fd asked again: %d, %v; want the kept %d", again, err, fd)
	}
}

// A stop that comes after the child exited on its own, before its follower
// saw the exit (the pipec following it was itself stopped, SIGSTOP, and
// is continued with the exit waiting), is no stop: the result is the
// child's own exit status. Before, it said "was stopped by the runtime",
// and a charge that had succeeded became unknown.
func TestStopAfterTheExitIsNoStop(t *testing.T) {
	c, err := spawn("/bin/sh", Spec{Argv: []string{"sh", "-c", "exit 0"}, Dir: t.TempDir(), Env: env()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	for deadline := time.Now().Add(10 * time.Second); !c.exited(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the child's exit never became readable")
		}
	}
	// The process as Start makes it, its follower not yet at the exit.
	p := &Process{pid: c.pid, grace: time.Second, done: make(chan struct{}), ended: c.exited}
	p.Stop()
	p.kill(true)
	if p.stopped || p.timedOut {
		t.Errorf("stopped %v, timed out %v: the child had exited on its own", p.stopped, p.timedOut)
	}
	if ws, err := c.reap(); err != nil || !ws.Exited() || ws.ExitStatus() != 0 {
		t.Errorf("status %v, %v: want its own exit 0", ws, err)
	}
}
