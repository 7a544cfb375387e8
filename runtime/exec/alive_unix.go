//go:build unix

package exec

import (
	"errors"
	"syscall"
)

// Alive reports whether a process with pid exists on this host. Only
// a definite "no such process" says no: a pid that exists (even reused by
// another program) or cannot be probed counts as alive, so the caller waits
// for the lease rather than take a live run's interval.
func Alive(pid int) bool {
	if pid <= 0 {
		return true
	}
	err := syscall.Kill(pid, 0)
	return !errors.Is(err, syscall.ESRCH)
}
