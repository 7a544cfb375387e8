//go:build unix

package exec

import "syscall"

// openFileLimit is the soft RLIMIT_NOFILE (Go raises it to the hard limit
// as it starts), 0 when it cannot be read; FileLimitTasks takes a huge one
// (RLIM_INFINITY) for none.
func openFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return r.Cur
}
