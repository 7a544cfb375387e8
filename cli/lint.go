package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/config"
	"github.com/pipec/pipec/lint/lintcmd"
	"github.com/pipec/pipec/spec/specload"
)

// newLintCmd is lintcmd's command, with both spec languages: pipec-lint
// builds the same command with HCL alone.
func newLintCmd(io IO) *cobra.Command {
	cmd := lintcmd.New(io.lintIO(), specload.Both{}, version())
	cmd.Args = minArgs(1)
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return fromLintErr(run(cmd, args)) }
	return cmd
}

// lintIO is io as lintcmd takes it.
func (io IO) lintIO() lintcmd.IO {
	return lintcmd.IO{Stdin: io.Stdin, Stdout: io.Stdout, Stderr: io.Stderr, Getenv: io.Getenv,
		Color: io.colorOn, StdoutTTY: io.StdoutTTY, StderrTTY: io.StderrTTY}
}

// fromLintErr turns lintcmd's exit codes into pipec's.
func fromLintErr(err error) error {
	var ee *lintcmd.ExitError
	if errors.As(err, &ee) {
		return &exitError{code: ee.Code, err: ee.Err}
	}
	return err
}

// loadConfig finds the configuration file (or reads the one named), as lint
// does (lintcmd.LoadConfig).
func loadConfig(io IO, named string) (*config.Config, error) {
	cfg, err := lintcmd.LoadConfig(io.lintIO(), named)
	return cfg, fromLintErr(err)
}
