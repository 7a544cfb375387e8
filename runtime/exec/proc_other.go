//go:build !linux

package exec

import "syscall"

const (
	sigTERM = syscall.SIGTERM
	sigCONT = syscall.SIGCONT
	sigKILL = syscall.SIGKILL
)

// BootID needs Linux.
func BootID() (string, error) { return "", ErrUnsupported }

// Identify needs Linux.
func Identify(pid int) (Identity, error) { return Identity{}, ErrUnsupported }

type heldProc struct{}

func (p *heldProc) signal(syscall.Signal) error { return ErrUnsupported }
func (p *heldProc) alive() bool                 { return false }
func (p *heldProc) close()                      {}

func findProcs(targets []Target) ([][]*heldProc, error) { return nil, ErrUnsupported }
