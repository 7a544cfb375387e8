package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestStateHelpFitsCommand: every command's --state help describes the
// default that command has (location): beside its SPEC argument (required
// or optional), beside its --spec file, or none at all (the workers, which
// openQueue refuses without a state). worker and workers used to promise a
// default beside a spec they do not take.
func TestStateHelpFitsCommand(t *testing.T) {
	seen := 0
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		f := c.Flags().Lookup("state")
		if f == nil {
			return
		}
		seen++
		use := c.Use
		var want string
		switch {
		case c.Flags().Lookup("spec") != nil:
			if strings.Contains(c.Flags().Lookup("spec").Usage, "(required)") {
				want = stateBesideSpec
			} else {
				want = stateBesideSpecFlag
			}
		case strings.Contains(use, "[SPEC"):
			want = stateBesideSpecOrHere
		case strings.Contains(use, "SPEC"):
			want = stateBesideSpec
		default:
			want = stateShared
		}
		if f.Usage != want {
			t.Errorf("%s: --state help is %q, want %q", c.CommandPath(), f.Usage, want)
		}
		if strings.Contains(c.Long, "PIPEC_STATE") && strings.Contains(use, "[SPEC") && !strings.Contains(c.Long, stateOrder) {
			t.Errorf("%s: the long help states an order of the state's sources other than stateOrder:\n%s", c.CommandPath(), c.Long)
		}
	}
	color := "auto"
	walk(newRoot(IO{color: &color}))
	if seen < 10 {
		t.Fatalf("only %d commands have --state", seen)
	}
}
