package worker_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The benchmarks report CPU beside wall time: on a shared machine CPU is
// the steadier measure, and it says which process the time went to (the
// workers and their tasks, the database server, pipec submit --wait).

// clockTick is the unit of /proc/PID/stat times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// procTimes reads a process's own CPU time and that of its children it
// waited for (utime+stime, cutime+cstime of /proc/PID/stat), and its parent.
func procTimes(pid int) (self, children time.Duration, ppid int, ok bool) {
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

// treeCPU is the CPU time of the processes rooted at root: their own and
// that of the descendants they waited for, and of the live ones.
func treeCPU(root int) time.Duration {
	parent := map[int]int{}
	times := map[int]time.Duration{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		self, children, ppid, ok := procTimes(pid)
		if ok {
			parent[pid], times[pid] = ppid, self+children
		}
	}
	var total time.Duration
	for pid, t := range times {
		for p := pid; p != 0; p = parent[p] {
			if p == root {
				total += t
				break
			}
		}
	}
	return total
}

// postmaster is the PostgreSQL server this test process started (its child
// named postgres), 0 if none.
func postmaster() int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		if _, _, ppid, ok := procTimes(pid); ok && ppid == os.Getpid() {
			return pid
		}
	}
	return 0
}
