package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/internal/suggest"
	"github.com/pipec/pipec/lint"
)

func newExplainCmd(io IO) *cobra.Command {
	return &cobra.Command{
		Use:   "explain [RULE]",
		Short: "Print a lint rule's documentation, or list every rule",
		Long: "explain RULE prints what the rule catches, why it matters, and a bad and a fixed\n" +
			"example. explain alone lists every rule with its default severity.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErr("explain: takes at most one rule (usage: pipec %s)", cmd.Use)
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return listRules(io)
			}
			return explainRule(io, args[0])
		},
	}
}

func listRules(io IO) error {
	w := tabwriter.NewWriter(io.Stdout, 0, 0, 2, ' ', 0)
	for _, r := range lint.All() {
		fmt.Fprintf(w, "%s\t%s\t%s\n", r.ID, r.Severity, r.Summary)
	}
	return w.Flush()
}

func explainRule(io IO, id string) error {
	r := lint.Lookup(id)
	if r == nil {
		return usageErr("explain: unknown rule %q%s (pipec explain lists them)", id, suggest.Hint(id, lint.IDs()))
	}
	_, err := io.Stdout.Write([]byte(lint.Explanation(r)))
	return err
}
