package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

type compileOptions struct {
	output string
}

func newCompileCmd(io IO) *cobra.Command {
	var opts compileOptions
	cmd := &cobra.Command{
		Use:   "compile SPEC",
		Short: "Write the compiled plan (deterministic JSON); refuses on error findings, shows warnings on stderr",
		Args:  exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return runCompile(io, args[0], opts)
		},
	}
	cmd.Flags().StringVarP(&opts.output, "output", "o", "", "write the plan to this file instead of stdout (a file is replaced atomically; a device or pipe is written to)")
	return cmd
}

func runCompile(io IO, path string, opts compileOptions) error {
	c, err := compileFile(path)
	if err != nil {
		return err
	}
	// Warnings are shown too: a plan is written, but the author should
	// know what lint would say about it.
	printDiagsText(io, append(c.Diags, c.Warnings...).Sort(), c.sources())
	if c.Diags.HasErrors() || c.Result == nil {
		return silentExit(ExitFindings)
	}
	b := c.Result.Plan.Marshal()
	if opts.output == "" {
		_, err := io.Stdout.Write(b)
		return err
	}
	if err := refuseInput(opts.output, path); err != nil {
		return err
	}
	return writeUserFile(opts.output, b, 0o644)
}

// withUsage is an argument check whose error names the command and shows
// its usage, with a usage exit code.
func withUsage(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			// "pipec sink adopt", not "pipec adopt", for a subcommand's.
			path := cmd.CommandPath()
			name := strings.TrimPrefix(path, cmd.Root().Name()+" ")
			return usageErr("%s: %v (usage: %s%s)", name, err, strings.TrimSuffix(path, cmd.Name()), cmd.Use)
		}
		return nil
	}
}

// exactArgs is cobra.ExactArgs withUsage.
func exactArgs(n int) cobra.PositionalArgs { return withUsage(cobra.ExactArgs(n)) }

// minArgs is cobra.MinimumNArgs withUsage.
func minArgs(n int) cobra.PositionalArgs { return withUsage(cobra.MinimumNArgs(n)) }
