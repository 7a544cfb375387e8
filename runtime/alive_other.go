//go:build !unix

package runtime

// processAlive cannot probe processes here: every owner counts as alive and
// its lease decides.
func processAlive(int) bool { return true }
