// Package cli is pipec's command line. Main returns an exit code instead of
// exiting, and every dependency (streams, environment) comes in through IO, so
// the whole command line is testable in-process.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
)

// Exit codes, the same for every command (DESIGN.md section 4).
const (
	ExitOK       = 0
	ExitFindings = 1 // error findings, or the run failed
	ExitUsage    = 2 // usage error or unreadable input
)

// IO is what a command may touch of the outside world.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment (NO_COLOR, PIPEC_*).
	Getenv func(string) string
	// Environ is the whole environment, handed (filtered) to tasks.
	Environ func() []string
	// StdoutTTY is true when stdout is a terminal (colour, live progress).
	StdoutTTY bool
}

// Std is the process's real IO.
func Std() IO {
	return IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Environ: os.Environ,
		StdoutTTY: isatty.IsTerminal(os.Stdout.Fd()) || isatty.IsCygwinTerminal(os.Stdout.Fd())}
}

// exitError carries an exit code up to Main. A nil err means the command
// already printed what it had to say.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

// usageErr makes an exit-code-2 error.
func usageErr(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// silentExit ends a command with a code after it printed its own output.
func silentExit(code int) error {
	if code == ExitOK {
		return nil
	}
	return &exitError{code: code}
}

// Main runs pipec with args (without the program name) and returns its exit code.
func Main(args []string, io IO) int {
	root := newRoot(io)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(io.Stderr, "pipec:", ee.err)
		}
		return ee.code
	}
	// Anything else comes from cobra itself: unknown command or flag, bad arguments.
	fmt.Fprintln(io.Stderr, "pipec:", err)
	return ExitUsage
}

func newRoot(io IO) *cobra.Command {
	root := &cobra.Command{
		Use:   "pipec",
		Short: "Compile, lint and run declarative data pipelines safely",
		Long: "pipec compiles pipeline specs (HCL or CUE) into a validated DAG, lints them for the\n" +
			"mistakes that hurt data pipelines, and runs them with a fenced, durable runtime.",
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetIn(io.Stdin)
	root.SetOut(io.Stdout)
	root.SetErr(io.Stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr("%v", err) })
	for _, cmd := range commands(io) {
		root.AddCommand(cmd)
	}
	return root
}
