// Package lintcmd runs `pipec lint`: the files it finds, the rules it runs,
// the formats it prints and its exit codes. pipec (cli, which parses the
// flags with cobra) and pipec-lint (the lint-only binary for pre-commit hooks
// and editors) both run it, so the two give the same findings, output and
// exit codes by construction; they differ only in the spec languages they
// link (Syntaxes). It links neither cobra nor pflag: pflag imports net, which
// makes a binary dynamically linked, and the dynamic loader alone costs a
// short lint run a third of its time.
package lintcmd

import (
	"fmt"
	stdio "io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/config"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/specdetect"
	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/report"
	"github.com/pipec/pipec/spec"
)

// IO is what a lint run may touch of the outside world.
type IO struct {
	Stdin  stdio.Reader
	Stdout stdio.Writer
	Stderr stdio.Writer
	// Getenv reads the environment (GOGC, GOMEMLIMIT); nil reads nothing.
	Getenv func(string) string
	// Color decides colour for a stream that is (tty) or is not a terminal,
	// as the program's --color flag and NO_COLOR say.
	Color     func(tty bool) bool
	StdoutTTY bool
	StderrTTY bool
}

// Options are the lint command's flags. Workers is 0 when --workers was not
// given (Run refuses an explicit value below 1 only through its caller: see
// cli and cmd/pipec-lint).
type Options struct {
	Format        string
	Strict        bool
	Disable       []string
	Workers       int
	Now           string
	StdinFilename string
	SkipNonSpecs  bool
	Config        string
}

// LoadConfig finds the configuration file (or reads the one named). Its
// findings are printed on stderr; any error among them is a usage error,
// since every later result would depend on a half-read configuration.
func LoadConfig(io IO, named string) (*config.Config, error) {
	var (
		cfg *config.Config
		ds  diag.Diagnostics
		err error
	)
	if named != "" {
		cfg, ds, err = config.Load(named)
	} else {
		cfg, ds, err = config.Find(".")
	}
	if err != nil {
		return nil, usageErr("%v", unwrapPathError(err))
	}
	if len(ds) > 0 {
		src, _ := os.ReadFile(cfg.File)
		_ = report.Text(io.Stderr, ds, report.Sources{cfg.File: src}, report.TextOptions{Color: io.Color(io.StderrTTY)})
		if ds.HasErrors() {
			return nil, usageErr("%s: invalid configuration", cfg.File)
		}
	}
	return cfg, nil
}

// Run lints paths (or standard input, for a single `-`) and prints the
// findings in opts.Format. Its errors are *ExitError (or, for a program
// without a language a file needs, *UnreadSyntaxError).
func Run(io IO, syns Syntaxes, version string, paths []string, opts Options) error {
	collectLate(io.Getenv)
	switch opts.Format {
	case "text", "json", "sarif", "github":
	default:
		return usageErr("lint: unknown --format %q (want text, json, sarif or github)", opts.Format)
	}
	cfg, err := LoadConfig(io, opts.Config)
	if err != nil {
		return err
	}
	lopts := cfg.Options()
	lopts.Disable = append(lopts.Disable, opts.Disable...)
	if opts.Workers > 0 {
		// Another pool: the file's labels described its own workers.
		lopts.Workers, lopts.WorkerLabels = opts.Workers, nil
	}
	if err := lint.CheckOptions(lopts); err != nil {
		return usageErr("lint: %v", err)
	}
	if opts.Now != "" {
		now, err := spec.ParseTime(opts.Now)
		if err != nil {
			return usageErr("lint: --now: %v", err)
		}
		lopts.Now = now
	} else {
		lopts.Now = time.Now()
	}

	var results []result
	var files []string
	// hint is said on stderr after the findings (stdin read as the wrong syntax).
	var hint string
	stdin := len(paths) == 1 && paths[0] == "-"
	switch {
	case stdin:
		name := opts.StdinFilename
		syn, ok := spec.SyntaxHCL, true
		if name == "" {
			name = "<stdin>"
		} else if syn, ok = spec.SyntaxOf(name); !ok {
			return usageErr("lint: --stdin-filename %s: not a spec file name (want .hcl or .cue)", name)
		}
		ignored := opts.StdinFilename != "" && cfg.Ignored(name)
		if !ignored && !syns.Reads(syn) {
			return &UnreadSyntaxError{Syntax: syn, Path: name}
		}
		src, err := stdio.ReadAll(io.Stdin)
		if err != nil {
			return usageErr("lint: reading standard input: %v", err)
		}
		if ignored || opts.SkipNonSpecs && !syns.IsPipeline(syn, src) && !specdetect.IsBinary(src) {
			results, files = nil, nil // an ignored file: no findings
		} else {
			files = []string{name}
			results = []result{lintLoaded(LoadSource(syns, syn, name, src, compiler.Check), lopts)}
			if opts.StdinFilename == "" && hasRule(results[0].diags, spec.RuleSyntax) && !syns.IsPipeline(spec.SyntaxHCL, src) {
				// Is it CUE? Only a program that reads CUE can tell.
				if !syns.Reads(spec.SyntaxCUE) {
					return &UnreadSyntaxError{Syntax: spec.SyntaxCUE, Path: name}
				}
				if syns.IsPipeline(spec.SyntaxCUE, src) {
					hint = "standard input was read as HCL, but it looks like a CUE spec: " +
						"name it with --stdin-filename (pipec lint - --stdin-filename x.cue)"
				}
			}
		}
	case len(paths) > 1 && contains(paths, "-"):
		return usageErr("lint: `-` (standard input) cannot be mixed with paths")
	default:
		if opts.StdinFilename != "" {
			return usageErr("lint: --stdin-filename needs `-` as the path")
		}
		files, err = FindSpecFiles(paths, FindOptions{Config: cfg, SkipNonSpecs: opts.SkipNonSpecs, Syntaxes: syns})
		if err != nil {
			return err
		}
		results = lintFiles(syns, files, lopts)
	}
	var all diag.Diagnostics
	src := report.Sources{}
	for i, r := range results {
		if r.err != nil {
			return r.err // the first unreadable file in sorted order, as a sequential run would report
		}
		all = append(all, r.diags...)
		src[files[i]] = r.src
	}
	all = cfg.Apply(all).Sort()
	switch opts.Format {
	case "json":
		err = report.JSON(io.Stdout, all)
	case "sarif":
		err = report.SARIF(io.Stdout, all, sarifOptions(cfg, src, version))
	case "github":
		// Annotations attach to files by their path from the repository
		// root, wherever pipec ran.
		err = report.GitHub(io.Stdout, fromRoot(all, sarifOptions(cfg, src, version)))
	default:
		err = report.Text(io.Stdout, all, src, report.TextOptions{Color: io.Color(io.StdoutTTY)})
	}
	if err != nil {
		return err
	}
	if hint != "" {
		fmt.Fprintln(io.Stderr, "pipec: hint:", hint)
	}
	if all.HasErrors() || (opts.Strict && all.Count(diag.Warning) > 0) {
		return silentExit(ExitFindings)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

type result struct {
	src   []byte
	diags diag.Diagnostics
	err   error
}

// lintFiles loads, compiles and lints files on all CPUs: files are
// independent and lint.Run keeps no shared state. Results come back in the
// order of files, so output does not depend on scheduling.
func lintFiles(syns Syntaxes, files []string, opts lint.Options) []result {
	results := make([]result, len(files))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			l, err := loadFile(syns, f)
			if err != nil {
				results[i].err = err
				return
			}
			results[i] = lintLoaded(l, opts)
		}()
	}
	wg.Wait()
	return results
}

// lintLoaded runs the rules over one loaded spec.
func lintLoaded(l Loaded, opts lint.Options) result {
	r := result{src: l.Src, diags: l.Diags}
	if l.Result != nil {
		r.diags = append(r.diags, lint.Run(l.Result, l.Src, opts)...)
	}
	return r
}
