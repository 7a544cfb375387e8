package store

import "path/filepath"

// DefaultPath is where pipec keeps its state, relative to the working
// directory.
const DefaultPath = ".pipec/state.db"

// ScratchDir is the folder where the users of a state file keep what they
// write beside it: attempts' logs, staging and heartbeat files, and the
// default artifact store (versions/). A state named state.db (the default,
// .pipec/state.db) has its folder to itself and uses it; any other name
// gets <name>.d beside it, so two states in one folder never share their
// scratch (nor does one's pipec gc remove the other's versions).
func ScratchDir(statePath string) string {
	if filepath.Base(statePath) == filepath.Base(DefaultPath) {
		return filepath.Dir(statePath)
	}
	return statePath + ".d"
}
