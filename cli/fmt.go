package cli

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/specfmt"
	"github.com/pipec/pipec/report"
)

type fmtOptions struct {
	check bool
	diff  bool
}

func newFmtCmd(io IO) *cobra.Command {
	var opts fmtOptions
	cmd := &cobra.Command{
		Use:   "fmt [--check] [--diff] PATH...",
		Short: "Format spec files in place (HCL with hclwrite, CUE with cue/format)",
		Long: "fmt rewrites each spec in its canonical layout (folders are searched as lint does).\n" +
			"--check changes nothing and lists the files that would change; --diff changes\n" +
			"nothing and prints a unified diff of the changes. Both exit 1 when a file would\n" +
			"change. A file that does not parse is reported and never rewritten (exit 1).",
		Args: minArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return runFmt(io, args, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.check, "check", false, "change nothing; list unformatted files and exit 1 if any")
	cmd.Flags().BoolVar(&opts.diff, "diff", false, "change nothing; print a unified diff of what would change and exit 1 if any")
	return cmd
}

func runFmt(io IO, paths []string, opts fmtOptions) error {
	// The configuration's ignore patterns keep fmt away from files that are
	// not specs (or not to be touched), as they keep lint away.
	cfg, err := loadConfig(io, "")
	if err != nil {
		return err
	}
	files, err := findSpecFiles(paths, findOptions{cfg: cfg})
	if err != nil {
		return err
	}
	code := ExitOK
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return usageErr("%v", unwrapPathError(err))
		}
		out, ds := formatSource(f, src)
		if ds.HasErrors() {
			printDiagsText(io, ds, report.Sources{f: src})
			code = ExitFindings
			continue
		}
		if bytes.Equal(out, src) {
			continue
		}
		if opts.diff {
			d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
				A: splitLines(src), B: splitLines(out),
				FromFile: f, ToFile: f + " (formatted)", Context: 3})
			if err != nil {
				return err
			}
			fmt.Fprint(io.Stdout, escapeControl(d))
			code = ExitFindings
			continue
		}
		if opts.check {
			fmt.Fprintln(io.Stdout, escapeControl(f))
			code = ExitFindings
			continue
		}
		if err := writeUserFile(f, out, 0o644); err != nil {
			return err
		}
	}
	return silentExit(code)
}

// formatSource returns the canonical layout of a spec (see specfmt.Source).
func formatSource(file string, src []byte) ([]byte, diag.Diagnostics) {
	return specfmt.Source(file, src)
}

// splitLines cuts text after each newline, as a unified diff wants its lines
// (difflib.SplitLines would add an empty last line to text ending in one).
func splitLines(b []byte) []string {
	lines := strings.SplitAfter(string(b), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}
