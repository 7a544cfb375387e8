//go:build !linux

package exec

import "syscall"

func pipe() (p [2]int, err error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	if err = syscall.Pipe(p[:]); err != nil {
		return p, err
	}
	syscall.CloseOnExec(p[0])
	syscall.CloseOnExec(p[1])
	return p, nil
}

func procAttr(*int) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// watchExit follows the exit by a goroutine that reaps the child: without
// waitid, seeing the exit is reaping it. No identity is read here (see
// Identify), so nothing needs the pid between the two.
func (c *child) watchExit(int) error {
	waited := make(chan waitStatus, 1)
	err := c.watchBy(func() {
		ws, err := wait4(c.pid)
		waited <- waitStatus{ws, err}
	})
	if err == nil {
		c.waited = waited
	}
	return err
}
