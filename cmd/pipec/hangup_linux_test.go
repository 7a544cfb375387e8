package main

import (
	"bytes"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestTerminalHangupStopsTheRun: pipec run in a terminal of its own (a
// pseudo-terminal it controls, as a login shell's job is in an SSH
// session) while a charging task runs; the terminal goes away (its other
// end closed, as when the connection drops), and the kernel sends pipec a
// hangup. pipec stops the task and records it unknown, as Ctrl-C does, and
// the writes to the dead terminal (EIO) do not stop it doing so. Before,
// the hangup killed pipec: the task ran on, orphaned, and the run and its
// attempt stayed running in the state. Started under nohup, pipec leaves
// the hangup ignored, as nohup asks: the run goes on and succeeds.
func TestTerminalHangupStopsTheRun(t *testing.T) {
	t.Run("progress", func(t *testing.T) { testTerminalHangup(t, false) })
	t.Run("json", func(t *testing.T) { testTerminalHangup(t, false, "--json") })
	t.Run("nohup", func(t *testing.T) { testTerminalHangup(t, true) })
}

func testTerminalHangup(t *testing.T, nohup bool, flags ...string) {
	dir := t.TempDir()
	sleep := "60"
	if nohup {
		sleep = "1" // it runs to its end
	}
	spec := strings.Replace(quickSpec, `command = ["true"]`, `command = ["sh", "-c", "echo $$ > pid; exec sleep `+sleep+`"]
    effects    = ["charge"]
    idempotent = false
    timeout    = "5m"`, 1)
	if err := os.WriteFile(filepath.Join(dir, "p.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	master, slave := openPTY(t)
	// pipec starts with SIGHUP at its default, as from a login shell, even
	// when this test runs under nohup: a signal this process watches is
	// reset for the programs it starts, where an ignored one stays ignored.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	cmd := pipec(t, dir, append([]string{"run", "p.hcl", "--interval", "2024-01-01"}, flags...)...)
	if nohup {
		path, err := exec.LookPath("nohup")
		if err != nil {
			t.Skipf("no nohup here: %v", err)
		}
		cmd.Path, cmd.Args = path, append([]string{"nohup"}, cmd.Args...)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// A session of its own, the terminal its controlling one (fd 0).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var out bytes.Buffer
	read := make(chan struct{})
	go func() { _, _ = out.ReadFrom(master); close(read) }()
	var pid int
	for deadline := time.Now().Add(time.Minute); pid == 0; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(dir, "pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("the task did not start")
		}
	}
	t.Cleanup(func() {
		if t.Failed() { // it may still run
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	master.Close() // the terminal hangs up
	code := exitCode(t, cmd.Wait())
	<-read
	if nohup {
		status, err := pipec(t, dir, "status").Output()
		if code != 0 || err != nil || !regexp.MustCompile(`p/2024-01-01/r1 +succeeded\n`).Match(status) {
			t.Errorf("under nohup, after the hangup: exit %d, want 0 and the run succeeded: %v\n%s", code, err, status)
		}
		return
	}
	if code != 130 {
		t.Errorf("exit %d after the hangup, want 130 (interrupted)", code)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("the task (pid %d) still runs after pipec ended", pid)
	}
	status, err := pipec(t, dir, "status").Output()
	if err != nil || !regexp.MustCompile(`p/2024-01-01/r1 +failed\n +a +unknown `).Match(status) {
		t.Errorf("the run stopped by the hangup is not recorded failed, its charging task unknown: %v\n%s\nterminal:\n%s",
			err, status, out.String())
	}
}

// openPTY opens a pseudo-terminal: master is the terminal's far end (an
// SSH server's), slave the end a session's processes read and write.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	// Non-blocking, so that Go's poller reads it: a Close then ends a Read
	// in progress and closes the descriptor at once, where a blocking
	// Read would keep it open (and the terminal up) until its next byte.
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}
