//go:build linux

package exec

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

const (
	sigTERM = unix.SIGTERM
	sigCONT = unix.SIGCONT
	sigKILL = unix.SIGKILL
)

// BootID is this boot's id, /proc/sys/kernel/random/boot_id. It cannot
// change while the process lives, so it is read once.
func BootID() (string, error) { return bootID() }

var bootID = sync.OnceValues(func() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
})

// readSmall reads a small file (a /proc entry) with plain system calls:
// open, read, close. os.ReadFile adds a stat and tries to register the file
// with the poller (four fcntl and an epoll_ctl that fails), which for every
// task start was most of the cost of reading its identity.
func readSmall(path string) ([]byte, error) {
	var fd int
	var err error
	for {
		if fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	b := make([]byte, 0, 1024)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// procStat is what /proc/PID/stat says of a process.
type procStat struct {
	state byte
	pgrp  int
	start uint64
}

// readStat parses /proc/PID/stat. The command name (field 2) may hold spaces
// and parentheses, so fields are counted after its last ')'.
func readStat(pid int) (procStat, error) {
	b, err := readSmall("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), f[2] field 5 (pgrp), f[19] field 22 (starttime).
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	pgrp, err1 := strconv.Atoi(f[2])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: bad fields", pid)
	}
	return procStat{state: f[0][0], pgrp: pgrp, start: start}, nil
}

// waitExited returns once the child pid has exited, leaving it to be
// reaped (WNOWAIT): until then its /proc entry is still its own.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// Identify reads the identity of a live process of this machine.
func Identify(pid int) (Identity, error) {
	self, err := Self()
	if err != nil {
		return Identity{}, err
	}
	st, err := readStat(pid)
	if err != nil {
		return Identity{}, err
	}
	self.PID, self.PGID, self.Start = pid, st.pgrp, st.start
	return self, nil
}

// environ reads pid's environment as a set of "KEY=value" entries; one that
// cannot be read (another user's process) is nil. blank: the read succeeded
// with nothing, as it does for a process in the middle of an execve until
// its new image's environment is set up.
func environ(pid int) (env map[string]bool, blank bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil, false
	}
	if len(b) == 0 {
		return nil, true
	}
	have := map[string]bool{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		have[string(kv)] = true
	}
	return have, false
}

// in reports whether every entry of m is in env.
func (m Marker) in(env map[string]bool) bool {
	if len(m) == 0 || env == nil {
		return false
	}
	for _, kv := range m {
		if !env[kv] {
			return false
		}
	}
	return true
}

// heldProc is a verified process, held by a pidfd.
type heldProc struct {
	pid int
	fd  int
}

func (p *heldProc) signal(sig unix.Signal) error { return unix.PidfdSendSignal(p.fd, sig, nil, 0) }

// alive: the pidfd is not readable yet (it becomes readable when the
// process exits, zombie or reaped).
func (p *heldProc) alive() bool {
	fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 0
}

func (p *heldProc) close() { unix.Close(p.fd) }

// findProcs reads /proc once and returns, per target, the live processes
// that belong to it (see EndOrphans), each held by a pidfd opened before it
// was verified.
func findProcs(targets []Target) ([][]*heldProc, error) {
	out := make([][]*heldProc, len(targets))
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out, err
	}
	self := os.Getpid()
	// Leaders verified alive: their groups' later members are theirs too.
	leaderAlive := make([]bool, len(targets))
	for i, t := range targets {
		if t.ID.Known() {
			if st, err := readStat(t.ID.PID); err == nil && st.start == t.ID.Start && st.state != 'Z' {
				leaderAlive[i] = true
			}
		}
	}
	var unread []blankProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone already, or not ours to look at
		}
		st, err := readStat(pid)
		if err != nil || st.state == 'Z' {
			unix.Close(fd)
			continue
		}
		owner := -1
		var env map[string]bool
		envRead, blank := false, false
		for i, t := range targets {
			id := t.ID
			switch {
			case id.Known() && pid == id.PID && st.start == id.Start:
				owner = i
			case leaderAlive[i] && st.pgrp == id.PGID && st.start >= id.Start:
				owner = i
			case t.markable(st):
				if !envRead {
					env, blank = environ(pid)
					envRead = true
				}
				if t.Marker.in(env) {
					owner = i
				}
			}
			if owner >= 0 {
				break
			}
		}
		if owner < 0 && blank && st.pgrp > 0 {
			unread = append(unread, blankProc{heldProc{pid: pid, fd: fd}, st})
			continue
		}
		if owner < 0 {
			unix.Close(fd)
			continue
		}
		out[owner] = append(out[owner], &heldProc{pid: pid, fd: fd})
	}
	// A user process that showed no environment (kernel threads, in process
	// group 0, never have one) is most likely in the middle of an execve: a
	// marked orphan's shell starting its next command, say. Its new image's
	// environment is set up within microseconds of running, but a process
	// preempted there can take milliseconds to run again. Each is read again,
	// 1, 2, 4 ... 32 ms apart, until it shows one (and is matched by its
	// marker as above) or some 60 ms have passed.
	for wait := time.Millisecond; len(unread) > 0 && wait <= 32*time.Millisecond; wait *= 2 {
		time.Sleep(wait)
		unread = slices.DeleteFunc(unread, func(p blankProc) bool {
			env, blank := environ(p.pid)
			if blank {
				return false
			}
			if i := markedBy(targets, p.st, env); i >= 0 {
				out[i] = append(out[i], &heldProc{pid: p.pid, fd: p.fd})
			} else {
				p.close()
			}
			return true
		})
	}
	for _, p := range unread {
		p.close()
	}
	return out, nil
}

// blankProc is a process held while its environment is read again.
type blankProc struct {
	heldProc
	st procStat
}

// markable: a process of stat st may be t's by its marker, having started
// no earlier than t's attempt.
func (t Target) markable(st procStat) bool { return len(t.Marker) > 0 && st.start >= t.ID.Start }

// markedBy returns the first target that a process of stat st and
// environment env belongs to by its marker, or -1.
func markedBy(targets []Target, st procStat, env map[string]bool) int {
	for i, t := range targets {
		if t.markable(st) && t.Marker.in(env) {
			return i
		}
	}
	return -1
}
