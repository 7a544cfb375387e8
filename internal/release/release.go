// Package release says which release of pipec a binary is, for every program
// built from this module (pipec and pipec-lint report the same version).
package release

import "runtime/debug"

// Fallback is pipec's release when the build info has no module version (a
// build from a clone); `go install …@version` builds report that version.
const Fallback = "0.1.0-dev"

// Version is the release alone: the module version from the build info, else
// Fallback.
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return Fallback
}
