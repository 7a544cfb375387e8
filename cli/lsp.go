package cli

import (
	"context"
	stdio "io"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/lsp"
)

type lspOptions struct {
	disable []string
	workers int
	config  string
}

func newLSPCmd(io IO) *cobra.Command {
	var opts lspOptions
	cmd := &cobra.Command{
		Use:   "lsp",
		Short: "Run the language server (LSP over standard input and output) for editors",
		Long: "lsp speaks the Language Server Protocol on standard input and output: an editor\n" +
			"started with `pipec lsp` shows every `pipec lint` finding as the author types, and\n" +
			"offers go to definition, references, rename, outline, hover, completion, quick\n" +
			"fixes and formatting for .hcl and .cue specs. Each spec is linted with the\n" +
			".pipec.yaml found from its folder upwards, the flags below on top, as `pipec lint`.\n" +
			"docs/editors.md shows the set-up for Neovim, VS Code, Helix and Zed.",
		Args: exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			if opts.workers < 0 {
				return usageErr("lsp: --workers must be at least 1")
			}
			if err := lint.CheckOptions(lint.Options{Disable: opts.disable}); err != nil {
				return usageErr("lsp: %v", err)
			}
			if io.Getenv == nil || io.Getenv("GOGC") == "" {
				// main trades memory for speed (GOGC=400) for one-shot
				// commands; a server stays up beside the editor holding
				// every open spec, so it collects twice as often: on the
				// 10,000-task spec, GOGC=200 costs about 10% more server CPU
				// per change than 400 and peaks at about 115 MB (HCL) and
				// 170 MB (CUE) instead of 120 and 225 (100: 110 and 165 MB,
				// 12% more CPU than 200). BenchmarkServerMemory10k and
				// BenchmarkChangeToDiagnostics in lsp/ measure both.
				debug.SetGCPercent(200)
			}
			return lsp.Serve(context.Background(), stdStream{io.Stdin, io.Stdout}, lsp.Options{
				Disable: opts.disable,
				Workers: opts.workers,
				Config:  opts.config,
				Version: version(),
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&opts.disable, "disable", nil, "turn a rule off (repeatable, or comma-separated)")
	f.IntVar(&opts.workers, "workers", 0, "size of the worker pool the pipelines run on, for failover-limits (default: the configuration's, else unknown)")
	f.StringVar(&opts.config, "config", "", "configuration file for every spec (default: .pipec.yaml in the spec's folder or a folder above it)")
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
