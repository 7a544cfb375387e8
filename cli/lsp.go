package cli

import (
	"context"
	stdio "io"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/lsp"
)

type lspOptions struct {
	disable []string
	enable  []string
	workers int
}

func newLSPCmd(io IO) *cobra.Command {
	opts := lspOptions{workers: lint.DefaultWorkers}
	cmd := &cobra.Command{
		Use:   "lsp",
		Short: "Run the language server (LSP over standard input and output) for editors",
		Long: "lsp speaks the Language Server Protocol on standard input and output: an editor\n" +
			"started with `pipec lsp` shows every `pipec lint` finding as the author types, and\n" +
			"offers go to definition, references, rename, outline, hover, completion, quick\n" +
			"fixes and formatting for .hcl and .cue specs. docs/editors.md shows the set-up for\n" +
			"Neovim, VS Code, Helix and Zed. The rule flags are those of `pipec lint`.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			lopts := lint.Options{Disable: opts.disable, Enable: opts.enable, Workers: opts.workers}
			if opts.workers < 1 {
				return usageErr("lsp: --workers must be at least 1")
			}
			if err := lint.CheckOptions(lopts); err != nil {
				return usageErr("lsp: %v", err)
			}
			return lsp.Serve(context.Background(), stdStream{io.Stdin, io.Stdout}, lsp.Options{
				LintOptions: func(string) lint.Options { return lopts },
				Version:     version(),
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&opts.disable, "disable", nil, "turn a rule off (repeatable, or comma-separated)")
	f.StringSliceVar(&opts.enable, "enable", nil, "turn on a rule that is off by default (repeatable, or comma-separated)")
	f.IntVar(&opts.workers, "workers", opts.workers, "number of workers failover-limits assumes")
	return cmd
}

// stdStream joins standard input and output into the stream the server reads
// and writes. Closing it closes standard input, which ends the read loop.
type stdStream struct {
	r stdio.Reader
	w stdio.Writer
}

func (s stdStream) Read(p []byte) (int, error)  { return s.r.Read(p) }
func (s stdStream) Write(p []byte) (int, error) { return s.w.Write(p) }
func (s stdStream) Close() error {
	if c, ok := s.r.(stdio.Closer); ok {
		return c.Close()
	}
	return nil
}
