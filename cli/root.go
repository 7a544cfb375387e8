// Package cli is pipec's command line. Main returns an exit code instead of
// exiting, and every dependency (streams, environment) comes in through IO, so
// the whole command line is testable in-process.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"syscall"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/pipec/pipec/lint/lintcmd"
	"github.com/pipec/pipec/report"
)

// Exit codes, the same for every command (docs/design.md section 4).
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
	// StderrTTY is true when stderr is a terminal (colour of findings
	// printed by compile, graph, run and fmt).
	StderrTTY bool
	// Context is cancelled, with ErrInterrupted as its cause, when the user
	// interrupts pipec (Ctrl-C, SIGTERM); nil means never. Commands that stop
	// cleanly on it (run, backfill) read it as cmd.Context().
	Context context.Context
	// Graceful is called when a command that stops cleanly on Context
	// starts, with what a first interrupt then does (Stopping*), said on
	// stderr when it comes; an interrupt before that, or in any other
	// command, ends pipec at once with exit code 130. Nil for in-process
	// callers.
	Graceful func(stopping string)
	// Procs, when set, is told by a command how many threads of its own Go
	// code can run at once to any use: a worker of N slots runs N visits at
	// a time, and more threads only hand its goroutines back and forth
	// around each round trip to the store. Nil for in-process callers,
	// whose process is not the command's to tune.
	Procs func(n int)

	// color is the --color flag's value, shared by every command.
	color *string
	// engine, when set (EngineMain), is where submit --due and backfill
	// --submit hand their runs instead of the state's queue.
	engine Engine
}

// ErrInterrupted is the cause of IO.Context's cancellation on Ctrl-C. It is
// a context.Canceled: what stops on the context (a run telling why its tasks
// ended) sees the plain cancellation a user's interrupt is.
var ErrInterrupted = fmt.Errorf("interrupted: %w", context.Canceled)

// ExitInterrupted is the exit code after Ctrl-C, 128 + SIGINT as shells report
// a process killed by it.
const ExitInterrupted = 130

// What a first interrupt does in a command that stops cleanly, as it
// says so (IO.Graceful).
const (
	StoppingRun = "the running tasks are stopped and recorded; " +
		"Ctrl-C again exits at once, and leaves what is not recorded yet to the next run"
	StoppingWorker = "the running tasks are stopped and handed back; " +
		"Ctrl-C again exits at once, and leaves them to be taken over once their claims expire"
	StoppingFollow = "what is submitted goes on with the workers, and nothing more is submitted; " +
		"Ctrl-C again exits at once"
	stoppingBeat = "Ctrl-C again exits at once"
)

// stoppingOf is what a first interrupt does in cmd, which stops cleanly
// when IO.Context is cancelled (recording what it stopped, so an interrupt
// waits for that instead of killing pipec); "" when cmd does not.
func stoppingOf(cmd *cobra.Command) string {
	switch cmd.Name() {
	case "run":
		return StoppingRun
	case "backfill":
		if f := cmd.Flags().Lookup("submit"); f != nil && f.Value.String() == "true" {
			return StoppingFollow
		}
		return StoppingRun
	case "worker":
		return StoppingWorker
	case "submit":
		return StoppingFollow
	case "heartbeat":
		return stoppingBeat
	}
	return ""
}

// colorOn decides colour for one stream: --color=always or never wins; auto
// (the default) colours a terminal unless NO_COLOR is set or TERM is dumb.
func (io IO) colorOn(tty bool) bool {
	mode := "auto"
	if io.color != nil {
		mode = *io.color
	}
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	getenv := io.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	return tty && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
}

// Std is the process's real IO.
func Std() IO {
	return IO{Stdin: os.Stdin, Stdout: quietPipe{w: os.Stdout}, Stderr: quietPipe{w: os.Stderr}, Getenv: os.Getenv, Environ: os.Environ,
		StdoutTTY: isatty.IsTerminal(os.Stdout.Fd()) || isatty.IsCygwinTerminal(os.Stdout.Fd()),
		StderrTTY: isatty.IsTerminal(os.Stderr.Fd()) || isatty.IsCygwinTerminal(os.Stderr.Fd()),
		Procs:     limitProcs}
}

// limitProcs lowers GOMAXPROCS to n, unless the environment sets it.
func limitProcs(n int) {
	if os.Getenv("GOMAXPROCS") == "" && n >= 1 && n < goruntime.GOMAXPROCS(0) {
		goruntime.GOMAXPROCS(n)
	}
}

// quietPipe drops output once its reader has gone (pipec run --json | head -1):
// the command goes on and ends with its own exit code, with no "broken pipe"
// message. Writes then get EPIPE instead of a fatal SIGPIPE because
// cmd/pipec watches SIGPIPE (Interruptible).
type quietPipe struct{ w io.Writer }

func (q quietPipe) Write(p []byte) (int, error) {
	n, err := q.w.Write(p)
	if err != nil && errors.Is(err, syscall.EPIPE) {
		return len(p), nil
	}
	return n, err
}

// exitError carries an exit code up to Main. A nil Err means the command
// already printed what it had to say. It is the lint command's own (pipec
// lint and pipec-lint end the same way).
type exitError = lintcmd.ExitError

// usageErr makes an exit-code-2 error.
func usageErr(format string, args ...any) error {
	return &exitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// silentExit ends a command with a code after it printed its own output.
func silentExit(code int) error {
	if code == ExitOK {
		return nil
	}
	return &exitError{Code: code}
}

// Main runs pipec with args (without the program name) and returns its exit code.
func Main(args []string, io IO) int {
	color := "auto"
	io.color = &color
	root := newRoot(io)
	root.SetArgs(args)
	ctx := io.Context
	if ctx == nil {
		ctx = context.Background()
	}
	cmd, err := root.ExecuteContextC(ctx)
	if errors.Is(context.Cause(ctx), ErrInterrupted) {
		fmt.Fprintln(io.Stderr, "pipec: interrupted")
		return ExitInterrupted
	}
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			// Errors quote user input (file names, flag values): escaped.
			fmt.Fprintln(io.Stderr, "pipec:", report.Escape(ee.Err.Error()))
		}
		return ee.Code
	}
	// Anything else comes from cobra itself: an unknown command (hinted
	// here), bad arguments.
	fmt.Fprintln(io.Stderr, "pipec:", report.Escape(rewriteUnknownCommand(cmd, err).Error()))
	return ExitUsage
}

func newRoot(io IO) *cobra.Command {
	root := &cobra.Command{
		Use:   "pipec",
		Short: "Compile, lint and run declarative data pipelines safely",
		Long: "pipec compiles pipeline specs (HCL or CUE) into a validated DAG, lints them for the\n" +
			"mistakes that hurt data pipelines, and runs them with a fenced, durable runtime.\n\n" +
			"Exit codes, for every command:\n" +
			"  0    success (warnings allowed, unless --strict)\n" +
			"  1    the spec has error findings, or the run failed\n" +
			"  2    usage error, unreadable input, or an invalid .pipec.yaml\n" +
			"  130  interrupted (Ctrl-C); a run records what it stopped first\n\n" +
			"Environment:\n" +
			"  NO_COLOR     no colour (unless --color=always)\n" +
			"  TERM=dumb    no colour (unless --color=always)\n\n" +
			"Files:\n" +
			"  .pipec.yaml  lint settings, found by walking up from the working directory\n" +
			"               (docs/config.md)\n\n" +
			"Documentation: docs/spec.md (the spec), docs/rules/ (one page per lint rule),\n" +
			"`pipec explain RULE`, and `pipec help COMMAND`.",
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       versionLine(buildInfo()),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch *io.color {
			case "auto", "always", "never":
			default:
				return usageErr("--color must be auto, always or never, not %q", *io.color)
			}
			if stopping := stoppingOf(cmd); io.Graceful != nil && stopping != "" {
				io.Graceful(stopping)
			}
			return nil
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVar(io.color, "color", *io.color, "colour findings: auto (a terminal without NO_COLOR), always or never")
	root.SetIn(io.Stdin)
	root.SetOut(io.Stdout)
	root.SetErr(io.Stderr)
	root.SetFlagErrorFunc(flagError)
	for _, cmd := range commands(io) {
		root.AddCommand(cmd)
	}
	addCompletions(root)
	checkSubcommands(root)
	return root
}
