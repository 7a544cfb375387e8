package exec

import (
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// child is a started process: its pid (also its group's id), the read end of
// its output pipe, and a descriptor that becomes readable once it has exited
// and before it is reaped (a pidfd on Linux; see watchExit).
//
// A child is started with syscall.ForkExec and followed by one goroutine
// that polls its output and its exit with blocking system calls. Through
// os/exec, a `true` cost this process about 70 µs more CPU (a quarter of the
// start of a no-op task): the output pipe went through the runtime's
// network poller (registered, parked on, woken, unregistered) and a second
// goroutine waited for the exit (BenchmarkStart, both side by side).
type child struct {
	pid    int
	out    int // -1 once the output is closed
	exitFD int
	// waited holds the status when the exit was watched by a goroutine
	// that had to reap the child to see it end (no pidfd, no waitid).
	waited chan waitStatus
}

type waitStatus struct {
	ws  syscall.WaitStatus
	err error
}

// spawn starts path with s's argv, working directory and environment, in a
// process group of its own, stdin on /dev/null and stdout and stderr on one
// pipe.
func spawn(path string, s Spec) (*child, error) {
	null, err := devNull.fd()
	if err != nil {
		return nil, err
	}
	p, err := pipe()
	if err != nil {
		return nil, os.NewSyscallError("pipe", err)
	}
	pidfd := -1
	pid, err := syscall.ForkExec(path, s.Argv, &syscall.ProcAttr{
		Dir:   s.Dir,
		Env:   dedupEnv(s.Env),
		Files: []uintptr{uintptr(null), uintptr(p[1]), uintptr(p[1])},
		Sys:   procAttr(&pidfd),
	})
	syscall.Close(p[1])
	if err != nil {
		syscall.Close(p[0])
		return nil, &os.PathError{Op: "fork/exec", Path: path, Err: err}
	}
	c := &child{pid: pid, out: p[0], exitFD: -1}
	if err := c.watchExit(pidfd); err != nil {
		// Nothing can follow it: it must not outlive this call unseen.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		c.reap()
		syscall.Close(p[0])
		return nil, err
	}
	return c, nil
}

// devNull is every child's stdin: one read-only descriptor of /dev/null,
// opened at the first spawn and kept for the process's life. Opening it
// for each child cost a path lookup per task (a few percent of a no-op
// task's start); reads of /dev/null share no state, so one descriptor
// serves every child, and close-on-exec keeps it out of them but as their
// stdin.
var devNull = nullFile{path: os.DevNull, opened: -1}

// nullFile opens path read-only once it is asked for, and again at the
// next ask when that failed (out of descriptors, say): a failure is not
// kept.
type nullFile struct {
	path   string
	mu     sync.Mutex
	opened int // -1 until opened
}

func (n *nullFile) fd() (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.opened >= 0 {
		return n.opened, nil
	}
	fd, err := syscall.Open(n.path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: n.path, Err: err}
	}
	n.opened = fd
	return fd, nil
}

// copyUntilExit copies the child's output to w as it comes until the child
// has exited (it is not reaped yet).
func (c *child) copyUntilExit(w io.Writer, buf []byte) {
	fds := []unix.PollFd{{Fd: int32(c.out), Events: unix.POLLIN}, {Fd: int32(c.exitFD), Events: unix.POLLIN}}
	for {
		if c.out < 0 {
			fds[0].Fd = -1 // poll skips it
		}
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return // cannot happen with valid descriptors; the exit is then waited for by reap
		}
		if fds[0].Revents != 0 {
			c.read(w, buf)
		}
		if fds[1].Revents != 0 {
			return
		}
	}
}

// exited reports whether the child has exited (its exit descriptor is
// readable), without waiting and without reaping it.
func (c *child) exited() bool {
	if c.exitFD < 0 {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(c.exitFD), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents != 0
}

// drain copies what is left of the output after the child's exit until the
// pipe is closed, but for no longer than limit: a grandchild outside the
// group may hold it open.
func (c *child) drain(w io.Writer, buf []byte, limit time.Duration) {
	deadline := time.Now().Add(limit)
	fds := []unix.PollFd{{Fd: int32(c.out), Events: unix.POLLIN}}
	for c.out >= 0 {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err == unix.EINTR || n == 0 {
			continue
		}
		if err != nil {
			return
		}
		c.read(w, buf)
	}
}

// read does one read of the output into w; at its end (or an error) the
// output is closed.
func (c *child) read(w io.Writer, buf []byte) {
	n, err := syscall.Read(c.out, buf)
	if err == syscall.EINTR {
		return
	}
	if n <= 0 {
		syscall.Close(c.out)
		c.out = -1
		return
	}
	_, _ = w.Write(buf[:n])
}

// reap waits for the child's end and returns its status; once.
func (c *child) reap() (syscall.WaitStatus, error) {
	if c.waited != nil {
		st := <-c.waited
		return st.ws, st.err
	}
	return wait4(c.pid)
}

// wait4 reaps pid and returns its status.
func wait4(pid int) (syscall.WaitStatus, error) {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			return ws, err
		}
	}
}

// close releases what is still open of the child's descriptors.
func (c *child) close() {
	if c.out >= 0 {
		syscall.Close(c.out)
		c.out = -1
	}
	if c.exitFD >= 0 {
		syscall.Close(c.exitFD)
		c.exitFD = -1
	}
}

// dedupEnv keeps the last of variables set twice, as os/exec did: a C
// program's getenv would see the first. A sorted list (Env.List's) has the
// entries of one variable side by side, and is checked without a map.
func dedupEnv(env []string) []string {
	if sortedUnique(env) {
		return env
	}
	seen := make(map[string]bool, len(env))
	out := make([]string, 0, len(env))
	for i := len(env) - 1; i >= 0; i-- {
		k, _, _ := strings.Cut(env[i], "=")
		if !seen[k] {
			seen[k] = true
			out = append(out, env[i])
		}
	}
	slices.Reverse(out)
	return out
}

// sortedUnique reports that env is sorted and sets no variable twice.
func sortedUnique(env []string) bool {
	prev := ""
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if i > 0 && (kv < env[i-1] || k == prev) {
			return false
		}
		prev = k
	}
	return true
}

// watchBy makes exitFD readable once wait returns, for a child whose exit
// has no descriptor of its own: a goroutine waits, then closes a pipe.
func (c *child) watchBy(wait func()) error {
	p, err := pipe()
	if err != nil {
		return os.NewSyscallError("pipe", err)
	}
	c.exitFD = p[0]
	go func() {
		wait()
		syscall.Close(p[1])
	}()
	return nil
}
