package cli

import (
	"github.com/spf13/cobra"

	"github.com/pipec/pipec/lint"
)

// addCompletions teaches cobra's shell completion (pipec completion SHELL)
// what pipec's arguments are: spec files for commands that take them, rule
// ids for explain and --disable, and the values of --format and --color.
func addCompletions(root *cobra.Command) {
	specFiles := func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"hcl", "cue"}, cobra.ShellCompDirectiveFilterFileExt
	}
	rules := func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return lint.IDs(), cobra.ShellCompDirectiveNoFileComp
	}
	values := func(v ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return v, cobra.ShellCompDirectiveNoFileComp
		}
	}
	_ = root.RegisterFlagCompletionFunc("color", values("auto", "always", "never"))
	formats := map[string][]string{"lint": {"text", "json", "sarif", "github"}, "graph": {"dot", "mermaid"}}
	for _, cmd := range root.Commands() {
		switch cmd.Name() {
		case "lint", "fmt", "compile", "graph", "run", "backfill", "submit":
			if cmd.ValidArgsFunction == nil {
				cmd.ValidArgsFunction = specFiles
			}
		case "explain":
			cmd.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return lint.IDs(), cobra.ShellCompDirectiveNoFileComp
			}
		}
		if f, ok := formats[cmd.Name()]; ok && cmd.Flags().Lookup("format") != nil {
			_ = cmd.RegisterFlagCompletionFunc("format", values(f...))
		}
		if cmd.Flags().Lookup("disable") != nil {
			_ = cmd.RegisterFlagCompletionFunc("disable", rules)
		}
	}
}
