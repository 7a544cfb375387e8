// Package exec runs one task attempt as a child process: its argv without a
// shell, in its own process group, with a timeout that kills the whole group,
// its combined output written to a log file with secret values redacted and
// its tail kept for the store and for classification.
//
// The package knows nothing about runs, tokens or stores: the caller builds the
// environment (see BaseEnv) and decides what an exit means (package retry).
package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults for Spec fields left zero.
const (
	// DefaultKillGrace is how long a process group gets between SIGTERM and
	// SIGKILL.
	DefaultKillGrace = 5 * time.Second
	// DefaultTailBytes is how much of the end of the output Result.Tail keeps.
	DefaultTailBytes = 64 << 10
	// drainWait bounds how long output is still read after the child exited,
	// when a grandchild keeps the output pipe open.
	drainWait = time.Second
)

// Spec is one process to run.
type Spec struct {
	// Argv is the command; Argv[0] is looked up in PATH of Env unless it
	// contains a slash (then it is relative to Dir).
	Argv []string
	// Dir is the working directory.
	Dir string
	// Env is the complete environment of the child.
	Env []string
	// Timeout kills the process group after this long; 0 means none.
	Timeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL (DefaultKillGrace).
	KillGrace time.Duration
	// LogPath receives the whole combined stdout and stderr, redacted. The
	// file (and its folder) is created when the first output arrives, so an
	// attempt that printed nothing costs no file. Empty: the output is only
	// kept as a tail.
	LogPath string
	// LogLimit caps the log file (DefaultLogLimit when 0): past it the
	// output is dropped and a marker says where (see logcap.go).
	LogLimit int64
	// Redact lists secret values replaced by "***" in the log and the tail.
	Redact []string
	// TailBytes is the size of Result.Tail (DefaultTailBytes).
	TailBytes int
	// Paths, when set, remembers PATH searches across the starts of one
	// run (see Paths); nil searches every time.
	Paths *Paths
	// IdentifyLater: the child's identity is read when Identity is first
	// called, not at the start, and not at all once the child has been
	// reaped (Identity then has no start time: not Known). For a process
	// whose identity is needed only if it outlives a moment (most end
	// sooner), reading it at every start was a /proc read each.
	IdentifyLater bool
}

// Result is how a process ended.
type Result struct {
	// ExitCode is the process's exit status, or -1 when a signal ended it.
	ExitCode int
	// Signal is the signal that ended the process, if any.
	Signal syscall.Signal
	// TimedOut: the runtime killed the group because Spec.Timeout elapsed.
	TimedOut bool
	// Timeout is Spec.Timeout, for the account of a timed-out ending.
	Timeout time.Duration
	// Stopped: the runtime killed the group because Stop was called or the
	// context was cancelled.
	Stopped bool
	// Leftovers: processes of the group were still alive when the main
	// process exited, and were killed (a task's processes end with it).
	Leftovers bool
	// Tail is the end of the combined output (redacted).
	Tail    string
	Started time.Time
	Ended   time.Time
}

// Success reports whether the process exited 0 on its own.
func (r Result) Success() bool {
	return r.ExitCode == 0 && r.Signal == 0 && !r.TimedOut && !r.Stopped
}

// Describe is a one-line account of the ending, for error messages.
func (r Result) Describe() string {
	switch {
	case r.TimedOut:
		return "timed out after " + ShortDuration(r.Timeout)
	case r.Stopped:
		return "was stopped by the runtime"
	case r.Signal != 0:
		return "killed by signal " + r.Signal.String()
	default:
		return fmt.Sprintf("exit code %d", r.ExitCode)
	}
}

// ShortDuration writes a duration as a spec would: 20m, 1h, 1m30s, 200ms
// (time.Duration.String gives 20m0s).
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// copyBuffers hold the buffers output is copied through. One per process
// was half of what a run of short tasks allocated (and so much of its
// garbage collection); a task that ends hands its buffer to the next.
var copyBuffers = sync.Pool{New: func() any {
	b := make([]byte, 32<<10)
	return &b
}}

// Process is a started child.
type Process struct {
	pid   int
	id    Identity // read once (identified), under mu
	grace time.Duration
	done  chan struct{}
	res   Result
	mu    sync.Mutex
	// identified: id holds what can be known; reaped: the child is gone
	// and its pid may name another process, so it is read no more.
	identified, reaped bool
	timedOut           bool
	stopped            bool
	killTimer          *time.Timer
	// ended says whether the child has exited, not yet reaped (its exit
	// readable, without waiting); asked only while !reaped.
	ended func() bool
}

// Start launches the process. An error means it could not start at all (no
// such command, unwritable log): nothing is running then.
func Start(ctx context.Context, s Spec) (*Process, error) {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return nil, errors.New("empty command")
	}
	if s.KillGrace <= 0 {
		s.KillGrace = DefaultKillGrace
	}
	if s.TailBytes <= 0 {
		s.TailBytes = DefaultTailBytes
	}
	logFile := &lazyFile{path: s.LogPath}
	closeLog := func() { logFile.Close() }
	path, err := s.Paths.look(s.Argv[0], s.Dir, s.Env)
	if err != nil {
		closeLog()
		return nil, err
	}
	started := time.Now()
	c, err := spawn(path, s)
	if err != nil {
		closeLog()
		return nil, err
	}
	p := &Process{pid: c.pid, grace: s.KillGrace, done: make(chan struct{}),
		id: Identity{PID: c.pid, PGID: c.pid}, ended: c.exited}
	if !s.IdentifyLater {
		// Read now, while the child cannot have been reaped: its start
		// time makes the recorded pid a name no other process will ever have.
		p.identify()
	}

	tail := newTail(s.TailBytes)
	var out io.Writer = tail
	capped := &cappedLog{w: logFile, max: s.LogLimit}
	if capped.max <= 0 {
		capped.max = DefaultLogLimit
	}
	if s.LogPath != "" {
		out = io.MultiWriter(capped, tail)
	}
	red := newRedactor(out, s.Redact)

	var timer *time.Timer
	if s.Timeout > 0 {
		timer = time.AfterFunc(s.Timeout, func() { p.kill(true) })
	}
	stopCtx := context.AfterFunc(ctx, func() { p.Stop() })

	go func() {
		buf := copyBuffers.Get().(*[]byte)
		defer copyBuffers.Put(buf)
		c.copyUntilExit(red, *buf)
		// The child has exited and is not reaped: its pid is still its own
		// until now, and is read no more from here.
		p.mu.Lock()
		p.reaped = true
		p.mu.Unlock()
		ws, werr := c.reap()
		// The task is its main process: whatever it left running in its
		// group (a "sleep 300 &", a child still appending to the output)
		// ends with it, before anyone reads the output. The group id cannot
		// name another group while a member lives.
		leftovers := syscall.Kill(-p.pid, 0) == nil
		if leftovers {
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		}
		stopCtx()
		if timer != nil {
			timer.Stop()
		}
		// The child is gone; its output may still be held open by a
		// grandchild. Read what is there, then stop waiting.
		c.drain(red, *buf, drainWait)
		c.close()
		_ = red.Flush()
		capped.finish()
		closeLog()
		p.mu.Lock()
		if p.killTimer != nil {
			p.killTimer.Stop()
		}
		res := Result{ExitCode: ws.ExitStatus(), TimedOut: p.timedOut, Timeout: s.Timeout, Stopped: p.stopped,
			Leftovers: leftovers, Tail: tail.String(), Started: started, Ended: time.Now()}
		p.mu.Unlock()
		if ws.Signaled() {
			res.Signal = ws.Signal()
			res.ExitCode = -1
		}
		if werr != nil {
			// Wait failed for another reason than the exit status.
			res.ExitCode = -1
		}
		p.res = res
		close(p.done)
	}()
	return p, nil
}

// PID is the child's process id, which is also its process group id.
func (p *Process) PID() int { return p.pid }

// Identity is the child's identity (pid, group, start time, boot, host), to
// record before anything depends on the process. With Spec.IdentifyLater,
// one asked for after the child was reaped has its pid and group only.
func (p *Process) Identity() Identity {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.identified && !p.reaped {
		p.identify()
	}
	return p.id
}

// identify reads the child's identity, which must not have been reaped.
func (p *Process) identify() {
	p.identified = true
	if id, err := Identify(p.pid); err == nil {
		p.id = id
	}
}

// Done is closed when the process has ended and its result is ready.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait blocks until the process ends and returns how it ended.
func (p *Process) Wait() Result {
	<-p.done
	return p.res
}

// Stop kills the process group (SIGTERM, then SIGKILL after the grace); the
// result then says Stopped. Stopping an ended process does nothing.
func (p *Process) Stop() { p.kill(false) }

// Signal sends sig to the whole process group.
func (p *Process) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return os.ErrProcessDone
	default:
	}
	return syscall.Kill(-p.pid, sig)
}

func (p *Process) kill(timeout bool) {
	select {
	case <-p.done:
		return
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timedOut || p.stopped {
		return
	}
	if p.reaped || p.ended() {
		// It exited on its own, and its follower has not seen it yet (this
		// pipec was itself stopped, or busy): its exit status is its own,
		// not a stop's.
		return
	}
	if timeout {
		p.timedOut = true
	} else {
		p.stopped = true
	}
	// SIGCONT too: a stopped process would otherwise keep SIGTERM pending.
	_ = syscall.Kill(-p.pid, syscall.SIGTERM)
	_ = syscall.Kill(-p.pid, syscall.SIGCONT)
	p.killTimer = time.AfterFunc(p.grace, func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		}
	})
}

// lookPath resolves argv[0] the way a shell would, but with the child's PATH
// and working directory rather than pipec's.
func lookPath(name, dir string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(pathOf(env)) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: command not found in PATH", name)
}

// pathOf is the search path of env: its (last) PATH, or without one the
// path execvp(3) uses.
func pathOf(env []string) string {
	p := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			p = v
		}
	}
	return p
}

func executable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return pe.Err
		}
		return err
	}
	if st.IsDir() {
		return errors.New("is a directory")
	}
	if st.Mode()&0o111 == 0 {
		return errors.New("permission denied (not executable)")
	}
	return nil
}

// lazyFile creates its file on the first write. A log that cannot be created
// loses the log, not the attempt: the tail still has the output's end.
type lazyFile struct {
	path string
	f    *os.File
	err  error
}

func (l *lazyFile) Write(p []byte) (int, error) {
	if l.f == nil && l.err == nil {
		if l.err = os.MkdirAll(filepath.Dir(l.path), 0o755); l.err == nil {
			l.f, l.err = os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		}
	}
	if l.f == nil {
		return len(p), nil
	}
	if _, err := l.f.Write(p); err != nil {
		l.err = err
	}
	return len(p), nil
}

func (l *lazyFile) Close() {
	if l.f != nil {
		l.f.Close()
	}
}
