// Package proctree measures the CPU time of a tree of processes from
// /proc, for benchmarks that report CPU beside wall time: on a shared
// machine CPU is the steadier measure, and it says which process the time
// went to (workers and their tasks, a database server).
package proctree

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc/PID/stat times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// times reads a process's own CPU time and that of its children it
// waited for (utime+stime, cutime+cstime of /proc/PID/stat), and its parent.
func times(pid int) (self, children time.Duration, ppid int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, 0, false
	}
	// The command (field 2) is in parentheses and may hold spaces.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 15 {
		return 0, 0, 0, false
	}
	n := func(i int) time.Duration { v, _ := strconv.ParseInt(f[i], 10, 64); return time.Duration(v) * clockTick }
	ppid, _ = strconv.Atoi(f[1])
	return n(11) + n(12), n(13) + n(14), ppid, true
}

// process is one live process as /proc shows it.
type process struct {
	ppid int
	cpu  time.Duration // its own and that of the children it waited for
}

// all reads every live process.
func all() map[int]process {
	ps := map[int]process{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if self, children, ppid, ok := times(pid); ok {
			ps[pid] = process{ppid, self + children}
		}
	}
	return ps
}

// under reports whether pid is root or one of its descendants in ps.
func under(ps map[int]process, pid, root int) bool {
	for p := pid; p != 0; p = ps[p].ppid {
		if p == root {
			return true
		}
		if _, ok := ps[p]; !ok {
			return false
		}
	}
	return false
}

// CPU is the CPU time of the processes rooted at root: their own and that
// of the descendants they waited for, and of the live ones.
func CPU(root int) time.Duration {
	ps := all()
	var total time.Duration
	for pid, p := range ps {
		if under(ps, pid, root) {
			total += p.cpu
		}
	}
	return total
}

// Descendants are the live processes below root, root excluded, in no
// particular order.
func Descendants(root int) []int {
	ps := all()
	var out []int
	for pid := range ps {
		if pid != root && under(ps, pid, root) {
			out = append(out, pid)
		}
	}
	return out
}

// Own is the CPU time of process pid alone, without its children's.
func Own(pid int) time.Duration {
	self, _, _, _ := times(pid)
	return self
}

// Split is the CPU time of process pid alone and that of the children it
// waited for; ok is false when pid cannot be read. A zombie (waited for
// with WNOWAIT, not reaped) still has both.
func Split(pid int) (self, children time.Duration, ok bool) {
	self, children, _, ok = times(pid)
	return self, children, ok
}

// Child is the pid of a child of parent named comm, 0 if none.
func Child(parent int, comm string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		c, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if strings.TrimSpace(string(c)) != comm {
			continue
		}
		if _, _, ppid, ok := times(pid); ok && ppid == parent {
			return pid
		}
	}
	return 0
}

// Stopped reports whether no thread of process pid can run: each is
// stopped (state T or t in /proc/PID/task/TID/stat) or dead (Z, X), or the
// process is gone. A SIGSTOP is only queued when kill returns, and a thread
// running on another CPU goes on until it is interrupted: a test that
// stops a server and at once expects no answer from it waits for this.
func Stopped(pid int) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return os.IsNotExist(err)
	}
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat"))
		if err != nil {
			continue // the thread is gone
		}
		s := string(b)
		// The state follows the command, which is in parentheses.
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) || !strings.ContainsRune("TtZX", rune(s[i+2])) {
			return false
		}
	}
	return true
}

// WaitStopped waits until every process of pids is Stopped, and says
// whether they were within the time given.
func WaitStopped(pids []int, within time.Duration) bool {
	for deadline := time.Now().Add(within); ; time.Sleep(time.Millisecond) {
		if !slices.ContainsFunc(pids, func(p int) bool { return !Stopped(p) }) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
