package pgtest

import "syscall"

// procAttr runs a server's program as cred, sent death when the test
// process dies.
func procAttr(cred *syscall.Credential, death syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: death}
}
