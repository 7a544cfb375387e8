//go:build unix

package cli

import "syscall"

func execEngine(bin string, argv, env []string) error {
	return syscall.Exec(bin, argv, env)
}
