package cli

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/report"
	"github.com/pipec/pipec/spec"
)

// homepage is pipec's information URI in SARIF logs.
const homepage = "https://github.com/pipec/pipec"

type lintOptions struct {
	format  string
	strict  bool
	disable []string
	enable  []string
	workers int
	now     string
}

func newLintCmd(io IO) *cobra.Command {
	opts := lintOptions{format: "text", workers: lint.DefaultWorkers}
	cmd := &cobra.Command{
		Use:   "lint PATH...",
		Short: "Parse, compile and check spec files or folders against every rule",
		Long: "lint parses and compiles each spec file (folders are searched for HCL files with a\n" +
			"pipeline block and CUE files defining pipeline) and runs every rule of the catalogue;\n" +
			"`pipec explain` lists the rules. A comment `// pipec:ignore RULE reason` (also `#` in\n" +
			"HCL) on a finding's line, or alone on the line above, suppresses it.\n\n" +
			"Exit codes: 0 no error findings, 1 error findings (or warnings with --strict),\n" +
			"2 usage error or unreadable input.",
		Args: minArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return runLint(io, args, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.format, "format", opts.format, "text, json, sarif or github")
	f.BoolVar(&opts.strict, "strict", false, "fail on warnings too")
	f.StringSliceVar(&opts.disable, "disable", nil, "turn a rule off (repeatable, or comma-separated)")
	f.StringSliceVar(&opts.enable, "enable", nil, "turn on a rule that is off by default (repeatable, or comma-separated)")
	f.IntVar(&opts.workers, "workers", opts.workers, "number of workers failover-limits assumes")
	f.StringVar(&opts.now, "now", "", "reference time for catchup-stampede, RFC 3339 (default: the current time)")
	return cmd
}

func runLint(io IO, paths []string, opts lintOptions) error {
	switch opts.format {
	case "text", "json", "sarif", "github":
	default:
		return usageErr("lint: unknown --format %q (want text, json, sarif or github)", opts.format)
	}
	lopts := lint.Options{Disable: opts.disable, Enable: opts.enable, Workers: opts.workers}
	if opts.workers < 1 {
		return usageErr("lint: --workers must be at least 1")
	}
	if err := lint.CheckOptions(lopts); err != nil {
		return usageErr("lint: %v", err)
	}
	if opts.now != "" {
		now, err := spec.ParseTime(opts.now)
		if err != nil {
			return usageErr("lint: --now: %v", err)
		}
		lopts.Now = now
	} else {
		lopts.Now = time.Now()
	}
	files, err := findSpecFiles(paths)
	if err != nil {
		return err
	}
	results := lintFiles(files, lopts)
	var all diag.Diagnostics
	src := report.Sources{}
	for i, r := range results {
		if r.err != nil {
			return r.err // the first unreadable file in sorted order, as a sequential run would report
		}
		all = append(all, r.diags...)
		src[files[i]] = r.src
	}
	all = all.Sort()
	switch opts.format {
	case "json":
		err = report.JSON(io.Stdout, all)
	case "sarif":
		err = report.SARIF(io.Stdout, all, reportRules(), report.ToolInfo{Name: "pipec", Version: version(), InformationURI: homepage})
	case "github":
		err = report.GitHub(io.Stdout, all)
	default:
		color := io.StdoutTTY && io.Getenv("NO_COLOR") == "" && io.Getenv("TERM") != "dumb"
		err = report.Text(io.Stdout, all, src, report.TextOptions{Color: color})
	}
	if err != nil {
		return err
	}
	if all.HasErrors() || (opts.strict && all.Count(diag.Warning) > 0) {
		return silentExit(ExitFindings)
	}
	return nil
}

type lintResult struct {
	src   []byte
	diags diag.Diagnostics
	err   error
}

// lintFiles loads, compiles and lints files on all CPUs: files are
// independent and lint.Run keeps no shared state. Results come back in the
// order of files, so output does not depend on scheduling.
func lintFiles(files []string, opts lint.Options) []lintResult {
	results := make([]lintResult, len(files))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, err := loadSpec(f)
			if err != nil {
				results[i].err = err
				return
			}
			results[i].src = c.Src
			results[i].diags = c.Diags
			if c.Result != nil {
				results[i].diags = append(results[i].diags, lint.Run(c.Result, c.Src, opts)...)
			}
		}()
	}
	wg.Wait()
	return results
}

// reportRules describes the catalogue for SARIF's rule table.
func reportRules() []report.Rule {
	rules := lint.All()
	out := make([]report.Rule, 0, len(rules))
	for _, r := range rules {
		out = append(out, report.Rule{ID: r.ID, Severity: r.Severity, Summary: r.Summary, Help: r.Doc,
			HelpURI: fmt.Sprintf("%s/blob/main/lint/rule_%s.go", homepage, strings.ReplaceAll(r.ID, "-", "_"))})
	}
	return out
}
