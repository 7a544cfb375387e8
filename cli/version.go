package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is pipec's release; builds from a module proxy report the module version.
const Version = "0.1.0-dev"

func newVersionCmd(io IO) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print pipec's version",
		Args:  exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(io.Stdout, "pipec %s (%s)\n", version(), runtime.Version())
			return err
		},
	}
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return Version
}
