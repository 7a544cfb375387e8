package cli

import (
	"fmt"
	stdio "io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/config"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/report"
	"github.com/pipec/pipec/spec"
)

// homepage is pipec's information URI in SARIF logs.
const homepage = "https://github.com/pipec/pipec"

type lintOptions struct {
	format        string
	strict        bool
	disable       []string
	workers       int
	now           string
	stdinFilename string
	skipNonSpecs  bool
	config        string
}

func newLintCmd(io IO) *cobra.Command {
	opts := lintOptions{format: "text"}
	cmd := &cobra.Command{
		Use:   "lint PATH... | lint - [--stdin-filename NAME]",
		Short: "Parse, compile and check spec files or folders against every rule",
		Long: "lint parses and compiles each spec file and runs every rule of the catalogue\n" +
			"(`pipec explain` lists them; docs/rules/ in the repository has a page per rule).\n\n" +
			"A folder is searched for the .hcl and .cue files that hold a pipeline (a top-level\n" +
			"`pipeline` block or field, found by parsing), skipping hidden folders and the paths\n" +
			"the configuration file ignores; Terraform and Packer files are left alone. A folder\n" +
			"with no spec, and an unreadable file, are errors (exit code 2).\n\n" +
			"`-` reads one spec from standard input; --stdin-filename names it in findings and\n" +
			"chooses the syntax by its extension (default HCL).\n\n" +
			"Settings come from .pipec.yaml, found by walking up from the working directory to\n" +
			"the repository root (see docs/config.md); flags win over it.\n\n" +
			"A comment `// pipec:ignore RULE reason` (also `#` in HCL) on a finding's line, or\n" +
			"alone on the line above, suppresses it.\n\n" +
			"Exit codes: 0 no error findings, 1 error findings (or warnings with --strict),\n" +
			"2 usage error, unreadable input or an invalid configuration file.",
		Example: "  pipec lint pipelines/\n" +
			"  pipec lint --format sarif . > pipec.sarif\n" +
			"  cat orders.hcl | pipec lint - --stdin-filename pipelines/orders.hcl",
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("workers") {
				opts.workers = 0
			} else if opts.workers < 1 {
				return usageErr("lint: --workers must be at least 1")
			}
			collectLate(io)
			return runLint(io, args, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.format, "format", opts.format, "text, json, sarif or github")
	f.BoolVar(&opts.strict, "strict", false, "fail on warnings too")
	f.StringSliceVar(&opts.disable, "disable", nil, "turn a rule off (repeatable, or comma-separated)")
	f.IntVar(&opts.workers, "workers", 0, "size of the worker pool the pipelines run on, for failover-limits (default: .pipec.yaml's workers, else the rule's default)")
	f.StringVar(&opts.now, "now", "", "reference time for catchup-stampede, RFC 3339 (default: the current time)")
	f.StringVar(&opts.stdinFilename, "stdin-filename", "", "with `-`: the file name findings carry, and whose extension picks the syntax")
	f.BoolVar(&opts.skipNonSpecs, "skip-non-specs", false, "skip named files that hold no pipeline (Terraform, Packer); the pre-commit hook sets it")
	f.StringVar(&opts.config, "config", "", "configuration file (default: .pipec.yaml in the working directory or a folder above it)")
	return cmd
}

// loadConfig finds the configuration file (or reads the one named). Its
// findings are printed on stderr; any error among them is a usage error,
// since every later result would depend on a half-read configuration.
func loadConfig(io IO, named string) (*config.Config, error) {
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
		printDiagsText(io, ds, report.Sources{cfg.File: src})
		if ds.HasErrors() {
			return nil, usageErr("%s: invalid configuration", cfg.File)
		}
	}
	return cfg, nil
}

func runLint(io IO, paths []string, opts lintOptions) error {
	switch opts.format {
	case "text", "json", "sarif", "github":
	default:
		return usageErr("lint: unknown --format %q (want text, json, sarif or github)", opts.format)
	}
	cfg, err := loadConfig(io, opts.config)
	if err != nil {
		return err
	}
	lopts := cfg.Options()
	lopts.Disable = append(lopts.Disable, opts.disable...)
	if opts.workers > 0 {
		// Another pool: the file's labels described its own workers.
		lopts.Workers, lopts.WorkerLabels = opts.workers, nil
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

	var results []lintResult
	var files []string
	// hint is said on stderr after the findings (stdin read as the wrong syntax).
	var hint string
	stdin := len(paths) == 1 && paths[0] == "-"
	switch {
	case stdin:
		name := opts.stdinFilename
		syn, ok := spec.SyntaxHCL, true
		if name == "" {
			name = "<stdin>"
		} else if syn, ok = spec.SyntaxOf(name); !ok {
			return usageErr("lint: --stdin-filename %s: not a spec file name (want .hcl or .cue)", name)
		}
		src, err := stdio.ReadAll(io.Stdin)
		if err != nil {
			return usageErr("lint: reading standard input: %v", err)
		}
		if opts.stdinFilename != "" && cfg.Ignored(name) ||
			opts.skipNonSpecs && !isPipelineSpec(syn, src) && !isBinary(src) {
			results, files = nil, nil // an ignored file: no findings
		} else {
			files = []string{name}
			results = []lintResult{lintSource(loadSourceWith(syn, name, src, compiler.Check), lopts)}
			if opts.stdinFilename == "" && hasRule(results[0].diags, spec.RuleSyntax) &&
				isPipelineSpec(spec.SyntaxCUE, src) && !isPipelineSpec(spec.SyntaxHCL, src) {
				hint = "standard input was read as HCL, but it looks like a CUE spec: " +
					"name it with --stdin-filename (pipec lint - --stdin-filename x.cue)"
			}
		}
	case len(paths) > 1 && contains(paths, "-"):
		return usageErr("lint: `-` (standard input) cannot be mixed with paths")
	default:
		if opts.stdinFilename != "" {
			return usageErr("lint: --stdin-filename needs `-` as the path")
		}
		files, err = findSpecFiles(paths, findOptions{cfg: cfg, skipNonSpecs: opts.skipNonSpecs})
		if err != nil {
			return err
		}
		results = lintFiles(files, lopts)
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
	switch opts.format {
	case "json":
		err = report.JSON(io.Stdout, all)
	case "sarif":
		err = report.SARIF(io.Stdout, all, sarifOptions(cfg, src))
	case "github":
		// Annotations attach to files by their path from the repository
		// root, wherever pipec ran.
		err = report.GitHub(io.Stdout, fromRoot(all, sarifOptions(cfg, src)))
	default:
		err = report.Text(io.Stdout, all, src, report.TextOptions{Color: io.colorOn(io.StdoutTTY)})
	}
	if err != nil {
		return err
	}
	if hint != "" {
		fmt.Fprintln(io.Stderr, "pipec: hint:", hint)
	}
	if all.HasErrors() || (opts.strict && all.Count(diag.Warning) > 0) {
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

// sarifOptions place SARIF paths relative to the repository root: the
// configuration's sarif.root, else the git root above the working directory,
// else the configuration file's folder, else the working directory.
func sarifOptions(cfg *config.Config, src report.Sources) report.SARIFOptions {
	wd, _ := os.Getwd()
	root := cfg.SARIFRoot
	if root == "" {
		root = gitRoot(wd)
	}
	if root == "" {
		root = cfg.Dir
	}
	if root == "" {
		root = wd
	}
	return report.SARIFOptions{
		Tool:    report.ToolInfo{Name: "pipec", Version: version(), InformationURI: homepage},
		Rules:   reportRules(),
		Root:    root,
		WorkDir: wd,
		Sources: src,
	}
}

// fromRoot rewrites file names relative to the root of opt (when they lie
// under it), for consumers that resolve paths from the repository root.
func fromRoot(ds diag.Diagnostics, opt report.SARIFOptions) diag.Diagnostics {
	if opt.Root == "" || opt.WorkDir == "" || opt.Root == opt.WorkDir {
		return ds
	}
	out := make(diag.Diagnostics, len(ds))
	for i, d := range ds {
		if f := d.Range.Filename; f != "" && f != "<stdin>" {
			abs := f
			if !filepath.IsAbs(abs) {
				abs = filepath.Join(opt.WorkDir, f)
			}
			if rel, err := filepath.Rel(opt.Root, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				d.Range.Filename = filepath.ToSlash(rel)
			}
		}
		out[i] = d
	}
	return out
}

// gitRoot is the nearest folder at or above dir holding .git (a folder, or a
// file in a worktree), or "".
func gitRoot(dir string) string {
	for dir != "" {
		if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
	return ""
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
			c, err := loadSpecWith(f, compiler.Check)
			if err != nil {
				results[i].err = err
				return
			}
			results[i] = lintSource(c, opts)
		}()
	}
	wg.Wait()
	return results
}

// lintSource runs the rules over one loaded spec.
func lintSource(c *compiled, opts lint.Options) lintResult {
	r := lintResult{src: c.Src, diags: c.Diags}
	if c.Result != nil {
		r.diags = append(r.diags, lint.Run(c.Result, c.Src, opts)...)
	}
	return r
}

// reportRules describes the catalogue for SARIF's rule table; each rule's
// help links to its page under docs/rules/.
func reportRules() []report.Rule {
	rules := lint.All()
	out := make([]report.Rule, 0, len(rules))
	for _, r := range rules {
		out = append(out, report.Rule{ID: r.ID, Severity: r.Severity, Summary: r.Summary, Help: r.Details(),
			HelpURI: lint.DocURL(r.ID)})
	}
	return out
}
