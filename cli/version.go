package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/internal/release"
)

// Version is pipec's release when the build info has no module version (a
// build from a clone); `go install …@version` builds report that version.
const Version = release.Fallback

func newVersionCmd(io IO) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print pipec's version, VCS revision and Go version",
		Long: "version prints the module version (from `go install …@version`, else the release in\n" +
			"the source), the VCS revision and commit time the binary was built from (when built\n" +
			"from a git checkout), and the Go toolchain. `pipec --version` prints the same line.",
		Args: exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(io.Stdout, versionLine(buildInfo()))
			return err
		},
	}
}

// buildInfo is the binary's build information, or nil.
func buildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

// versionLine is `pipec VERSION (revision REV[, modified], TIME; GO OS/ARCH)`.
func versionLine(bi *debug.BuildInfo) string {
	v := Version
	var rev, when string
	modified := false
	if bi != nil {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	var parts []string
	if rev != "" {
		r := "revision " + rev[:min(12, len(rev))]
		if modified {
			r += ", modified"
		}
		if when != "" {
			r += ", " + when
		}
		parts = append(parts, r)
	} else {
		parts = append(parts, "revision unknown")
	}
	parts = append(parts, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH)
	return fmt.Sprintf("pipec %s (%s)", v, strings.Join(parts, "; "))
}

// version is the release alone, for SARIF's tool version.
func version() string { return release.Version() }
