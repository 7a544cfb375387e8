package cli

import (
	stdio "io"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/compiler"
)

type graphOptions struct {
	format string
}

func newGraphCmd(io IO) *cobra.Command {
	opts := graphOptions{format: "dot"}
	cmd := &cobra.Command{
		Use:   "graph SPEC",
		Short: "Print the DAG as Graphviz DOT or Mermaid",
		Args:  exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return runGraph(io, args[0], opts)
		},
	}
	cmd.Flags().StringVar(&opts.format, "format", opts.format, "dot or mermaid")
	return cmd
}

func runGraph(io IO, path string, opts graphOptions) error {
	var write func(stdio.Writer, *compiler.Graph) error
	switch opts.format {
	case "dot":
		write = compiler.WriteDOT
	case "mermaid":
		write = compiler.WriteMermaid
	default:
		return usageErr("graph: unknown --format %q (want dot or mermaid)", opts.format)
	}
	c, err := compileFile(path)
	if err != nil {
		return err
	}
	printDiagsText(io, c.Diags, c.sources())
	if c.Result == nil || c.Result.Graph == nil {
		return silentExit(ExitFindings)
	}
	// A graph with errors (a cycle, say) is still worth drawing.
	if err := write(io.Stdout, c.Result.Graph); err != nil {
		return err
	}
	if c.Diags.HasErrors() {
		return silentExit(ExitFindings)
	}
	return nil
}
