//go:build linux

// owncpu runs a command and prints its wall time and its CPU time split in
// two: the command's own, and its children's (the processes it started and
// waited for). bench/run1k.sh compares pipec and make with it: their
// children are the same `true`s, so what differs is each one's own cost.
//
//	go run ./bench/owncpu [-o FILE] make -s -j2 -f Makefile
//	wall 0.381 cpu 0.668 self 0.120 children 0.550
//
// The split is read from /proc/PID/stat while the command is a zombie
// (waited for without being reaped), in clock ticks (10 ms); the total is
// the rusage of the reaped command. Output: seconds, one line, on standard
// error or in FILE; the command's own output goes where owncpu's does. Its
// exit code is the command's.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pipec/pipec/internal/proctree"
)

func main() {
	args, out := os.Args[1:], os.Stderr
	if len(args) >= 2 && args[0] == "-o" {
		f, err := os.Create(args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "owncpu:", err)
			os.Exit(2)
		}
		args, out = args[2:], f
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: owncpu [-o FILE] COMMAND [ARG]...")
		os.Exit(2)
	}
	code, err := run(args, out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "owncpu:", err)
		os.Exit(2)
	}
	if out != os.Stderr {
		out.Close()
	}
	os.Exit(code)
}

func run(argv []string, out *os.File) (int, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == nil {
			break
		}
		if err != unix.EINTR {
			return 0, fmt.Errorf("waitid: %w", err)
		}
	}
	wall := time.Since(start)
	self, children, ok := proctree.Split(pid)
	if !ok {
		return 0, fmt.Errorf("/proc/%d/stat cannot be read", pid)
	}
	_ = cmd.Wait() // reaps it; its exit status is in ProcessState
	ps := cmd.ProcessState
	cpu := ps.UserTime() + ps.SystemTime()
	fmt.Fprintf(out, "wall %.3f cpu %.3f self %.3f children %.3f\n", wall.Seconds(), cpu.Seconds(), self.Seconds(), children.Seconds())
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ps.ExitCode(), nil
}
