// Command pipec-lint is `pipec lint` for HCL specs, in a binary without CUE,
// the runtime, the stores and the web view: a pre-commit hook or an editor
// starts it on every save, and a process that links all of pipec spends more
// time initialising its packages than linting a small spec.
//
// `pipec-lint ARGS` prints what `pipec lint ARGS` prints, byte for byte, and
// exits with the same code: both run lint/lintcmd. What
// pipec-lint cannot do alone it hands to pipec (`pipec lint ARGS`, found
// beside pipec-lint or on PATH) before printing anything: a run that meets a
// .cue file, any usage error, --help, and flags written in an unusual way, so
// messages and hints are pipec's own.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/mattn/go-isatty"

	"github.com/pipec/pipec/internal/release"
	"github.com/pipec/pipec/lint/lintcmd"
	"github.com/pipec/pipec/report"
)

func main() {
	tuneGC()
	watchSignals()
	os.Exit(run(os.Args[1:]))
}

// run lints as `pipec lint args` would, handing the run to pipec when it
// must.
func run(args []string) int {
	stdin := &recorder{r: os.Stdin}
	var stdout, stderr bytes.Buffer
	code, handOff := lint(args, lintcmd.IO{
		Stdin: stdin, Stdout: &stdout, Stderr: &stderr, Getenv: os.Getenv,
		StdoutTTY: isTerminal(os.Stdout), StderrTTY: isTerminal(os.Stderr),
	})
	if handOff {
		// pipec gets standard input itself when pipec-lint did not touch
		// it (a terminal must stay a terminal, and an open one must not
		// keep pipec-lint waiting after pipec exits); else what was read.
		var in io.Reader = os.Stdin
		if stdin.read.Len() > 0 || stdin.ended {
			in = bytes.NewReader(stdin.read.Bytes())
		}
		return handToPipec(args, in)
	}
	// Output is held until the run is known not to need pipec, so nothing
	// is printed twice. A reader that went away costs the output, not the
	// exit code (as in pipec).
	_, _ = os.Stdout.Write(stdout.Bytes())
	_, _ = os.Stderr.Write(stderr.Bytes())
	return code
}

// lint runs the lint command with HCL alone; handOff is true when pipec must
// run instead (a CUE file, a usage error, --help, a flag written in a way
// parseArgs does not take).
func lint(args []string, lio lintcmd.IO) (code int, handOff bool) {
	paths, opts, color, ok := parseArgs(args)
	if !ok || len(paths) == 0 {
		return 0, true
	}
	lio.Color = func(tty bool) bool { return colorOn(color, tty) }
	err := lintcmd.Run(lio, lintcmd.HCLOnly{}, release.Version(), paths, opts)
	var ee *lintcmd.ExitError
	switch {
	case err == nil:
		return lintcmd.ExitOK, false
	case errors.As(err, &ee) && ee.Code == lintcmd.ExitFindings && ee.Err == nil:
		return ee.Code, false
	}
	// A file in another language, or a usage error (its message and hint
	// are pipec's).
	return 0, true
}

// parseArgs reads `pipec lint`'s flags as pipec's flag parser (pflag) does,
// for the spellings it accepts: --name VALUE and --name=VALUE, flags before,
// between and after the paths, `--` ending them, --disable repeated or
// comma-separated, --strict and --skip-non-specs bare or =true/=false, and
// --color. Anything else (-h, an unknown or short flag, a value it would have
// to interpret, such as a quoted list or a number in another base) is not
// ok: pipec then parses it, and says what is wrong. pipec-lint does not link
// pflag because pflag imports net, which makes the binary dynamically linked.
func parseArgs(args []string) (paths []string, opts lintcmd.Options, color string, ok bool) {
	opts.Format, color = "text", "auto"
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(paths, args[i+1:]...), opts, color, true
		}
		if a == "-" || !strings.HasPrefix(a, "-") {
			paths = append(paths, a)
			continue
		}
		if !strings.HasPrefix(a, "--") {
			return nil, opts, color, false // -h and every short flag
		}
		name, value, hasValue := strings.Cut(a[2:], "=")
		switch name {
		case "strict", "skip-non-specs":
			b := true
			if hasValue {
				switch value {
				case "true":
				case "false":
					b = false
				default:
					return nil, opts, color, false
				}
			}
			if name == "strict" {
				opts.Strict = b
			} else {
				opts.SkipNonSpecs = b
			}
			continue
		case "format", "now", "stdin-filename", "config", "color", "disable", "workers":
		default:
			return nil, opts, color, false
		}
		if !hasValue {
			if i+1 >= len(args) {
				return nil, opts, color, false
			}
			i++
			value = args[i]
		}
		switch name {
		case "format":
			opts.Format = value
		case "now":
			opts.Now = value
		case "stdin-filename":
			opts.StdinFilename = value
		case "config":
			opts.Config = value
		case "color":
			switch value {
			case "auto", "always", "never":
				color = value
			default:
				return nil, opts, color, false
			}
		case "disable":
			// pflag reads the value as one CSV record; without quotes or
			// line breaks that is a split on commas.
			if value == "" || strings.ContainsAny(value, "\"\r\n") {
				return nil, opts, color, false
			}
			opts.Disable = append(opts.Disable, strings.Split(value, ",")...)
		case "workers":
			n, err := strconv.Atoi(value)
			if err != nil || n < 1 || n > 1<<30 || value != strconv.Itoa(n) {
				return nil, opts, color, false
			}
			opts.Workers = n
		}
	}
	return paths, opts, color, true
}

// colorOn is pipec's rule: --color=always or never wins; auto colours a
// terminal unless NO_COLOR is set or TERM is dumb.
func colorOn(mode string, tty bool) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	return tty && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}

// handToPipec runs `pipec lint args` with the standard streams (stdin: what
// pipec-lint read of it, then the rest) and returns its exit code.
func handToPipec(args []string, stdin io.Reader) int {
	pipec, err := findPipec()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pipec-lint:", report.Escape(err.Error()))
		return lintcmd.ExitUsage
	}
	cmd := exec.Command(pipec, append([]string{"lint"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	}
	fmt.Fprintln(os.Stderr, "pipec-lint:", report.Escape(err.Error()))
	return lintcmd.ExitUsage
}

// findPipec is the pipec installed beside pipec-lint (go install puts both in
// one folder), else the one on PATH.
func findPipec() (string, error) {
	name := "pipec"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), name); isFile(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath("pipec"); err == nil {
		return p, nil
	}
	return "", errors.New("this run needs pipec (CUE specs, or a usage error to explain), which is neither beside pipec-lint nor on PATH; install both with `go install ./cmd/...`")
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

func isTerminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// recorder keeps what was read of standard input, for pipec if the run is
// handed over after reading it. lintcmd reads standard input to its end or
// not at all.
type recorder struct {
	r     io.Reader
	read  bytes.Buffer
	ended bool // a read returned EOF or an error
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.read.Write(p[:n])
	if err != nil {
		r.ended = true
	}
	return n, err
}

// watchSignals does what pipec does for lint: Ctrl-C or SIGTERM ends the
// process with exit code 130 at once, and a reader that goes away gives
// writes EPIPE instead of killing the process.
func watchSignals() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGPIPE)
	go func() {
		for s := range sigs {
			if s != syscall.SIGPIPE {
				os.Exit(130)
			}
		}
	}()
}

// tuneGC is pipec's (cmd/pipec): GOGC=400 under a soft limit of 768 MiB,
// unless GOGC or GOMEMLIMIT are set in the environment.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(768 << 20)
	}
}
