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
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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
	self, children, err := split(pid)
	if err != nil {
		return 0, err
	}
	_ = cmd.Wait() // reaps it; its exit status is in ProcessState
	ps := cmd.ProcessState
	cpu := ps.UserTime() + ps.SystemTime()
	fmt.Fprintf(out, "wall %.3f cpu %.3f self %.3f children %.3f\n", wall.Seconds(), cpu.Seconds(), self, children)
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ps.ExitCode(), nil
}

// split reads a zombie's own CPU seconds and its reaped children's from
// /proc/PID/stat (utime, stime, cutime, cstime).
func split(pid int) (self, children float64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted here follow its closing parenthesis.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var t [4]float64
	for k := range t {
		n, err := strconv.ParseUint(f[11+k], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		t[k] = float64(n) / ticksPerSecond
	}
	return t[0] + t[1], t[2] + t[3], nil
}

// ticksPerSecond is USER_HZ, which Linux fixes at 100 for every program.
const ticksPerSecond = 100
