package proctest

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestProc(t *testing.T) {
	p := Start(t, "sh", exec.Command("sh", "-c", "echo ready; exec sleep 60"), 0)
	if !p.WaitOutput(t, "ready", time.Minute) {
		t.Fatalf("exited before printing: %v\n%s", p.Err, p.Output())
	}
	p.Signal(t, syscall.SIGSTOP)
	p.Signal(t, syscall.SIGCONT)
	p.Signal(t, syscall.SIGKILL)
	p.WaitKilled(t)

	q := Start(t, "true", exec.Command("true"), 0)
	if q.WaitOutput(t, "never printed", time.Minute) {
		t.Fatal("found what was never printed")
	}
	if q.Err != nil {
		t.Fatal(q.Err)
	}
}

// TestStopAtTheEnd: a process still running when its test ends is stopped,
// gently for the grace given, even a stopped one.
func TestStopAtTheEnd(t *testing.T) {
	var gentle, stopped *Proc
	t.Run("leaves them running", func(t *testing.T) {
		gentle = Start(t, "gentle", exec.Command("sh", "-c", "trap 'exit 7' TERM; echo ready; while :; do sleep 0.05; done"), time.Minute)
		gentle.WaitOutput(t, "ready", time.Minute)
		stopped = Start(t, "stopped", exec.Command("sleep", "60"), 0)
		stopped.Signal(t, syscall.SIGSTOP)
	})
	for _, p := range []*Proc{gentle, stopped} {
		select {
		case <-p.Done:
		default:
			t.Fatalf("%s still runs after its test", p.Name)
		}
	}
	if ee, ok := gentle.Err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Errorf("gentle ended with %v, want its TERM trap's exit 7", gentle.Err)
	}
}
