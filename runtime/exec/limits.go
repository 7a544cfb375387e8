package exec

import (
	"errors"
	"syscall"
)

// ResourcesShort reports a start that failed for want of something the
// machine gives back as other processes end: file descriptors (EMFILE,
// ENFILE) or processes and memory for a fork (EAGAIN, ENOMEM), not
// anything about the command itself.
func ResourcesShort(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.EAGAIN, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Open files pipec holds, for FileLimitTasks: about FilesPerTask for each
// running task (its output pipe and its pidfd, and a pipe end while it
// starts), and up to filesReserved of its own (the state's files and
// connections, an object store's connections, the files a freeze copies or
// a check reads).
const (
	FilesPerTask  = 3
	filesReserved = 128
)

// FileLimitTasks is how many tasks may run at once under this process's
// open-file limit (ulimit -n) with room left for pipec's own files, at
// least 1, and that limit; 0, 0 when there is no limit to speak of.
func FileLimitTasks() (tasks int, limit uint64) {
	limit = openFileLimit()
	if limit == 0 || limit >= 1<<20 {
		return 0, 0
	}
	if limit <= filesReserved+FilesPerTask {
		return 1, limit
	}
	return int((limit - filesReserved) / FilesPerTask), limit
}
