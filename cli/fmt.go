package cli

import (
	"bytes"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/atomicfile"
	"github.com/pipec/pipec/internal/specfmt"
	"github.com/pipec/pipec/report"
)

type fmtOptions struct {
	check bool
}

func newFmtCmd(io IO) *cobra.Command {
	var opts fmtOptions
	cmd := &cobra.Command{
		Use:   "fmt [--check] PATH...",
		Short: "Format spec files in place (HCL with hclwrite, CUE with cue/format)",
		Args:  minArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return runFmt(io, args, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.check, "check", false, "change nothing; list unformatted files and exit 1 if any")
	return cmd
}

func runFmt(io IO, paths []string, opts fmtOptions) error {
	files, err := findSpecFiles(paths)
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
		if opts.check {
			fmt.Fprintln(io.Stdout, f)
			code = ExitFindings
			continue
		}
		st, err := os.Stat(f)
		if err != nil {
			return usageErr("%v", unwrapPathError(err))
		}
		if err := atomicfile.Write(f, out, st.Mode().Perm()); err != nil {
			return usageErr("%v", err)
		}
	}
	return silentExit(code)
}

// formatSource returns the canonical layout of a spec (see specfmt.Source).
func formatSource(file string, src []byte) ([]byte, diag.Diagnostics) {
	return specfmt.Source(file, src)
}
