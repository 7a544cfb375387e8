package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/webview"
)

type reportOptions struct {
	state stateFlag
	out   string
	specs []string
}

func newReportCmd(io IO) *cobra.Command {
	var opts reportOptions
	cmd := &cobra.Command{
		Use:   "report RUN [--state S] [--spec SPEC] -o run.html",
		Short: "Write one run's page (DAG, timeline, attempts, publishes) as a self-contained HTML file",
		Long: "report writes the page pipec ui shows for RUN (an id such as orders/2024-01-01/r1, as pipec\n" +
			"status lists them) as one HTML file with its stylesheet and SVG inline: it needs no server, no\n" +
			"network and no script, so a CI job can keep it as an artifact. -o - writes it to stdout.\n" +
			"Give the spec (--spec) to draw the DAG of a run made by pipec run; the state is --state, else\n" +
			"PIPEC_STATE, else .pipec/state.db beside the spec, else here.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReport(cmd.Context(), io, args[0], opts)
		},
	}
	opts.state.registerHelp(cmd, stateBesideSpecFlag)
	cmd.Flags().StringVarP(&opts.out, "output", "o", "", "the file to write (required; - for stdout)")
	cmd.Flags().StringArrayVar(&opts.specs, "spec", nil, "the pipeline's spec or plan file: draws the DAG of a local run")
	return cmd
}

func runReport(ctx context.Context, io IO, run string, opts reportOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if io.Getenv == nil {
		io.Getenv = func(string) string { return "" }
	}
	if opts.out == "" {
		return usageErr("report: give the file to write with -o (- for stdout)")
	}
	src, loc, closeState, err := viewSource(ctx, io, &opts.state, opts.specs)
	if err != nil {
		return err
	}
	defer closeState()
	if opts.out != "-" {
		if err := refuseInput(opts.out, append(slices.Clone(opts.specs), loc.Path)...); err != nil {
			return err
		}
	}
	var b bytes.Buffer
	if err := webview.Report(ctx, &b, src, loc.String(), run); err != nil {
		if errors.Is(err, store.ErrNotFound) || webview.IsNoRun(err) {
			return usageErr("report: no run %q in state %s (pipec status lists the runs)", run, loc)
		}
		return &exitError{Code: ExitFindings, Err: fmt.Errorf("report: %v", err)}
	}
	if opts.out == "-" {
		_, err := io.Stdout.Write(b.Bytes())
		return err
	}
	return writeUserFile(opts.out, b.Bytes(), 0o644)
}
