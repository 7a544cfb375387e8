package exec

import "syscall"

func pipe() (p [2]int, err error) {
	err = syscall.Pipe2(p[:], syscall.O_CLOEXEC)
	return p, err
}

// procAttr asks for the child's pidfd, which polls readable once the child
// has exited and before it is reaped.
func procAttr(pidfd *int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, PidFD: pidfd}
}

// watchExit follows the exit by the pidfd, or on a kernel that gave none
// (before 5.3) by a goroutine waiting without reaping (waitExited).
func (c *child) watchExit(pidfd int) error {
	if pidfd >= 0 {
		c.exitFD = pidfd
		return nil
	}
	return c.watchBy(func() { waitExited(c.pid) })
}
