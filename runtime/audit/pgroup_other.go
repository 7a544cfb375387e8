//go:build !unix

package audit

import "os/exec"

// ownProcessGroup is a no-op where process groups do not exist; cancellation
// kills the command itself.
func ownProcessGroup(*exec.Cmd) {}
