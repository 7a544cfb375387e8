//go:build !unix

package cli

import (
	"os"
	"os/exec"
)

func execEngine(bin string, argv, env []string) error {
	cmd := exec.Command(bin, argv[1:]...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return &exitError{Code: ee.ExitCode(), Err: err}
		}
		return err
	}
	return nil
}
