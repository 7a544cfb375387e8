package cli

import (
	stdio "io"

	"github.com/spf13/cobra"
)

type graphOptions struct {
	format string
}

func newGraphCmd(io IO) *cobra.Command {
	opts := graphOptions{format: "dot"}
	cmd := &cobra.Command{
		Use:   "graph SPEC",
		Short: "Print the DAG as Graphviz DOT or Mermaid",
		Long: "graph draws the pipeline: tasks (boxes), checks (diamonds), publishes and sinks\n" +
			"(cylinders, marked fenced or not). A data edge is labelled with the artifact that\n" +
			"flows; an input of another interval (raw@-1) is dashed (dotted in Mermaid); a\n" +
			"depends_on edge (order without data) is dotted grey with a hollow arrow (thick in\n" +
			"Mermaid); a check that gates a publish is green. Render DOT with\n" +
			"`pipec graph SPEC | dot -Tpng -o dag.png`.",
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return runGraph(io, args[0], opts)
		},
	}
	cmd.Flags().StringVar(&opts.format, "format", opts.format, "dot or mermaid")
	return cmd
}

func runGraph(io IO, path string, opts graphOptions) error {
	var write func(*picture, stdio.Writer) error
	switch opts.format {
	case "dot":
		write = (*picture).writeDOT
	case "mermaid":
		write = (*picture).writeMermaid
	default:
		return usageErr("graph: unknown --format %q (want dot or mermaid)", opts.format)
	}
	c, err := compileFile(path)
	if err != nil {
		return err
	}
	printDiagsText(io, c.Diags, c.sources())
	if c.Result == nil || c.Result.Plan == nil {
		return silentExit(ExitFindings)
	}
	// A graph with errors (a cycle, say) is still worth drawing.
	if err := write(newPicture(c.Result.Plan), io.Stdout); err != nil {
		return err
	}
	if c.Diags.HasErrors() {
		return silentExit(ExitFindings)
	}
	return nil
}
