//go:build !linux

package pgtest

import "syscall"

// procAttr runs a server's program as cred. Only Linux can have it
// signalled when the test process dies: elsewhere a test process killed
// without cleaning up leaves its server running.
func procAttr(cred *syscall.Credential, _ syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}
