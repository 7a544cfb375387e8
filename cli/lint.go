package cli

import (
	"github.com/spf13/cobra"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/report"
)

type lintOptions struct {
	format string
	strict bool
}

func newLintCmd(io IO) *cobra.Command {
	opts := lintOptions{format: "text"}
	cmd := &cobra.Command{
		Use:   "lint PATH...",
		Short: "Parse, compile and check spec files or folders",
		Args:  minArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return runLint(io, args, opts)
		},
	}
	cmd.Flags().StringVar(&opts.format, "format", opts.format, "text, json")
	cmd.Flags().BoolVar(&opts.strict, "strict", false, "fail on warnings too")
	return cmd
}

func runLint(io IO, paths []string, opts lintOptions) error {
	if opts.format != "text" && opts.format != "json" {
		return usageErr("lint: unknown --format %q (want text or json)", opts.format)
	}
	files, err := findSpecFiles(paths)
	if err != nil {
		return err
	}
	var all diag.Diagnostics
	src := report.Sources{}
	for _, f := range files {
		c, err := compileFile(f)
		if err != nil {
			return err
		}
		all = append(all, c.Diags...)
		src[f] = c.Src
	}
	all = all.Sort()
	if opts.format == "json" {
		err = report.JSON(io.Stdout, all)
	} else {
		err = report.Text(io.Stdout, all, src, report.TextOptions{})
	}
	if err != nil {
		return err
	}
	if all.HasErrors() || (opts.strict && all.Count(diag.Warning) > 0) {
		return silentExit(ExitFindings)
	}
	return nil
}
