// Package proctest starts the real processes a test drives (pipec run,
// pipec worker, a pipec-temporal worker) and cleans up after them: their
// output captured, their exit waited for, none left running when the test
// ends. The workers' tests and the Temporal dispatcher's share it, as they
// share the scenarios of internal/scenario.
package proctest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is a process a test started.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	// Done is closed once the process has exited; Err is then what Wait
	// returned.
	Done chan struct{}
	Err  error

	mu  sync.Mutex
	out bytes.Buffer
}

// Start starts cmd, its standard output and error into the Proc. When the
// test ends, a process still running is sent SIGTERM and given grace to
// exit (no grace: none), then SIGCONT (it may be stopped) and SIGKILL; a
// failed test logs its output.
func Start(t testing.TB, name string, cmd *exec.Cmd, grace time.Duration) *Proc {
	t.Helper()
	p := &Proc{Name: name, Cmd: cmd, Done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p, p
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.Err = cmd.Wait(); close(p.Done) }()
	t.Cleanup(func() {
		p.stop(grace)
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.Output())
		}
	})
	return p
}

// stop ends the process if it still runs, gently for grace.
func (p *Proc) stop(grace time.Duration) {
	select {
	case <-p.Done:
		return
	default:
	}
	if grace > 0 {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.Done:
			return
		case <-time.After(grace):
		}
	}
	_ = p.Cmd.Process.Signal(syscall.SIGCONT)
	_ = p.Cmd.Process.Kill()
	<-p.Done
}

// Write appends the process's output.
func (p *Proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// Output is what the process printed so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// WaitOutput waits until the output holds s (true) or the process has
// exited without printing it (false). It fails t after within: the
// deadline only bounds a broken test.
func (p *Proc) WaitOutput(t testing.TB, s string, within time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(p.Output(), s) {
		select {
		case <-p.Done:
			return strings.Contains(p.Output(), s)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %q within %v:\n%s", p.Name, s, within, p.Output())
		}
	}
	return true
}

// Signal sends sig and, unless it is SIGSTOP or SIGCONT, waits for the
// exit.
func (p *Proc) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	if sig == syscall.SIGSTOP || sig == syscall.SIGCONT {
		return
	}
	select {
	case <-p.Done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not exit after %v", p.Name, sig)
	}
}

// WaitExit waits for the process to end on its own and fails t if it has
// not within (the deadline only bounds a broken test).
func (p *Proc) WaitExit(t testing.TB, within time.Duration) {
	t.Helper()
	select {
	case <-p.Done:
	case <-time.After(within):
		t.Fatalf("%s did not end within %v:\n%s", p.Name, within, p.Output())
	}
}

// WaitKilled waits for the process to die of a SIGKILL (a test hook's,
// say) and fails t if it ended otherwise or not within two minutes.
func (p *Proc) WaitKilled(t testing.TB) {
	t.Helper()
	p.WaitExit(t, 2*time.Minute)
	var ee *exec.ExitError
	if !errors.As(p.Err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("%s ended with %v, not by SIGKILL:\n%s", p.Name, p.Err, p.Output())
	}
}

// WaitFile waits until path exists (a task's mark that it started, say)
// and fails t if it has not within.
func WaitFile(t testing.TB, path string, within time.Duration) {
	t.Helper()
	if !Appears(path, within) {
		t.Fatalf("%s did not appear within %v", path, within)
	}
}

// Appears waits until path exists, and says whether it did within: for
// a goroutine of a test, which may not fail it.
func Appears(path string, within time.Duration) bool {
	for deadline := time.Now().Add(within); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
