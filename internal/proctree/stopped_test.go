package proctree

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// A process is Stopped once SIGSTOP took hold of it, not while it runs,
// and again once it is gone.
func TestStopped(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	if Stopped(pid) {
		t.Fatal("a sleeping process is stopped")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if !WaitStopped([]int{pid}, time.Minute) {
		t.Fatal("SIGSTOP did not stop it")
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); Stopped(pid); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("still stopped after SIGCONT")
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if !Stopped(pid) {
		t.Error("a process that is gone can run")
	}
}
