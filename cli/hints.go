package cli

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pipec/pipec/internal/suggest"
)

// unknownCommand is the usage error for a command name c does not have:
// cobra's did-you-mean (edit distance or prefix) on one line, and where the
// commands are listed.
func unknownCommand(c *cobra.Command, name string) error {
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's default, which SuggestionsFor alone does not apply
	}
	msg := fmt.Sprintf("unknown command %q for %q", name, c.CommandPath())
	s := slices.Compact(c.SuggestionsFor(name))
	// A short name is within two edits of many commands: the ones it
	// begins, if any, are the likelier ("st": status, not fmt or gc).
	if prefixed := slices.DeleteFunc(slices.Clone(s), func(n string) bool {
		return !strings.HasPrefix(strings.ToLower(n), strings.ToLower(name))
	}); len(prefixed) > 0 {
		s = prefixed
	}
	if len(s) > 0 {
		msg += "; did you mean " + quotedOr(s) + "?"
	}
	return usageErr("%s (`%s --help` lists the commands)", msg, c.CommandPath())
}

// rewriteUnknownCommand turns cobra's own unknown-command error (for the
// root, whose arguments cobra checks itself) into unknownCommand's; any
// other error is returned as it is.
func rewriteUnknownCommand(c *cobra.Command, err error) error {
	rest, ok := strings.CutPrefix(err.Error(), "unknown command ")
	if !ok || c == nil {
		return err
	}
	q, err2 := strconv.QuotedPrefix(rest)
	if err2 != nil {
		return err
	}
	name, err2 := strconv.Unquote(q)
	if err2 != nil {
		return err
	}
	return unknownCommand(c, name)
}

// subcommandArgs is the Args of a command that only groups subcommands
// (pipec sink): an argument is a misspelt subcommand.
func subcommandArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return unknownCommand(cmd, args[0])
	}
	return nil
}

// checkSubcommands makes every command that groups subcommands (sink, and
// cobra's completion, added here rather than on Execute) refuse an unknown
// one with unknownCommand; cobra does that only for the root, and otherwise
// prints the group's help and exits 0 (pipec completion bsh).
func checkSubcommands(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c == root || !c.HasSubCommands() {
			return
		}
		c.Args = subcommandArgs
		if !c.Runnable() {
			// cobra shows the help of a command that cannot run before
			// it checks the arguments.
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	}
	walk(root)
}

// flagError is the root's flag error function: an unknown flag gets the
// nearest of the command's flags by edit distance ("--intervl": did you
// mean --interval?) and where the flags are listed; every flag error is a
// usage error.
func flagError(c *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) {
		return usageErr("%v", err)
	}
	msg := err.Error()
	if ne.GetSpecifiedShortnames() == "" {
		if name, ok := suggest.Closest(ne.GetSpecifiedName(), flagNames(c)); ok {
			msg += "; did you mean --" + name + "?"
		}
	}
	return usageErr("%s (`%s --help` lists its flags)", msg, c.CommandPath())
}

// flagNames are the names of the flags c takes, its own and inherited,
// sorted, hidden ones left out.
func flagNames(c *cobra.Command) []string {
	var names []string
	add := func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	}
	c.Flags().VisitAll(add)
	c.InheritedFlags().VisitAll(add)
	if c.Flags().Lookup("help") == nil {
		names = append(names, "help")
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// quotedOr is "a", or "a" or "b", ….
func quotedOr(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
