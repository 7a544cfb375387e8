//go:build unix

package exec

import (
	"fmt"
	"os"
	"syscall"
	"testing"
)

// ResourcesShort tells what the machine gives back (files, processes,
// memory) from what is the command's (a missing program, no permission),
// however the error is wrapped.
func TestResourcesShort(t *testing.T) {
	for _, c := range []struct {
		err   error
		short bool
	}{
		{&os.PathError{Op: "fork/exec", Path: "/usr/bin/true", Err: syscall.EMFILE}, true},
		{fmt.Errorf("open log: %w", &os.PathError{Op: "open", Path: "x.log", Err: syscall.ENFILE}), true},
		{&os.SyscallError{Syscall: "fork", Err: syscall.EAGAIN}, true},
		{syscall.ENOMEM, true},
		{&os.PathError{Op: "fork/exec", Path: "/nope", Err: syscall.ENOENT}, false},
		{&os.PathError{Op: "fork/exec", Path: "/etc/passwd", Err: syscall.EACCES}, false},
	} {
		if got := ResourcesShort(c.err); got != c.short {
			t.Errorf("ResourcesShort(%v) = %v", c.err, got)
		}
	}
}

// FileLimitTasks follows the process's open-file limit: room for pipec's
// own files first, then FilesPerTask a task, at least one task.
func TestFileLimitTasks(t *testing.T) {
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
		t.Skip(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was)
	for _, c := range []struct {
		soft  uint64
		tasks int
	}{{1024, (1024 - filesReserved) / FilesPerTask}, {256, (256 - filesReserved) / FilesPerTask}, {64, 1}} {
		if c.soft > was.Max {
			continue
		}
		lim := syscall.Rlimit{Cur: c.soft, Max: was.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
		if tasks, limit := FileLimitTasks(); tasks != c.tasks || limit != c.soft {
			t.Errorf("under %d: %d tasks (limit %d), want %d", c.soft, tasks, limit, c.tasks)
		}
	}
}
