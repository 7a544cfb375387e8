package cli

import (
	"github.com/spf13/cobra"

	"github.com/pipec/pipec/config"
	"github.com/pipec/pipec/lint/lintcmd"
	"github.com/pipec/pipec/spec/specload"
)

// newLintCmd is `pipec lint`: its flags and help here, the run in lintcmd
// with both spec languages (pipec-lint runs it with HCL alone, parsing the
// same flags itself).
func newLintCmd(io IO) *cobra.Command {
	opts := lintcmd.Options{Format: "text"}
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
				opts.Workers = 0
			} else if opts.Workers < 1 {
				return usageErr("lint: --workers must be at least 1")
			}
			return lintcmd.Run(io.lintIO(), specload.Both{}, version(), args, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Format, "format", opts.Format, "text, json, sarif or github")
	f.BoolVar(&opts.Strict, "strict", false, "fail on warnings too")
	f.StringSliceVar(&opts.Disable, "disable", nil, "turn a rule off (repeatable, or comma-separated)")
	f.IntVar(&opts.Workers, "workers", 0, "size of the worker pool the pipelines run on, for failover-limits (default: .pipec.yaml's workers, else the rule's default)")
	f.StringVar(&opts.Now, "now", "", "reference time for catchup-stampede, RFC 3339 (default: the current time)")
	f.StringVar(&opts.StdinFilename, "stdin-filename", "", "with `-`: the file name findings carry, and whose extension picks the syntax")
	f.BoolVar(&opts.SkipNonSpecs, "skip-non-specs", false, "skip named files that hold no pipeline (Terraform, Packer); the pre-commit hook sets it")
	f.StringVar(&opts.Config, "config", "", "configuration file (default: .pipec.yaml in the working directory or a folder above it)")
	return cmd
}

// lintIO is io as lintcmd takes it.
func (io IO) lintIO() lintcmd.IO {
	return lintcmd.IO{Stdin: io.Stdin, Stdout: io.Stdout, Stderr: io.Stderr, Getenv: io.Getenv,
		Color: io.colorOn, StdoutTTY: io.StdoutTTY, StderrTTY: io.StderrTTY}
}

// loadConfig finds the configuration file (or reads the one named), as lint
// does (lintcmd.LoadConfig).
func loadConfig(io IO, named string) (*config.Config, error) {
	cfg, err := lintcmd.LoadConfig(io.lintIO(), named)
	return cfg, err
}
