package sink

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pipec/pipec/internal/atomicfile"
)

// Freeze copies a staging directory into an immutable, content-addressed
// folder under root (root/<hex digest>, files read-only, synced) and returns
// it with its digest. The digest is of the bytes copied, so what the audit
// then reads, what downstream tasks read and what a sink publishes are the
// same bytes, whatever still writes into the staging directory afterwards.
// Freezing the same content again returns the folder already there.
func Freeze(staging, root string) (dir, digest string, err error) {
	// Durably: the version renamed into root must be reachable after a
	// crash, root's own name included (a new artifact's folder in the
	// default store).
	if err := atomicfile.MkdirAll(root); err != nil {
		return "", "", fmt.Errorf("freeze: %w", err)
	}
	tmp, err := os.MkdirTemp(root, ".tmp-")
	if err != nil {
		return "", "", fmt.Errorf("freeze: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return "", "", fmt.Errorf("freeze: %w", err)
	}
	digest, copied, err := walkCopy(staging, tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return "", "", fmt.Errorf("freeze %s: %w", staging, err)
	}
	final := filepath.Join(root, strings.TrimPrefix(digest, "sha256:"))
	if fi, err := os.Stat(final); err == nil && fi.IsDir() {
		// Content-addressed: the same digest is the same bytes, synced
		// when that folder was frozen. The copy is thrown away unsynced.
		copied.discard()
		os.RemoveAll(tmp)
		return final, digest, nil
	}
	if err := copied.sync(true); err != nil {
		os.RemoveAll(tmp)
		return "", "", fmt.Errorf("freeze: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.RemoveAll(tmp)
		if fi, serr := os.Stat(final); serr == nil && fi.IsDir() {
			return final, digest, nil // frozen by another attempt meanwhile
		}
		return "", "", fmt.Errorf("freeze: %w", err)
	}
	if err := atomicfile.SyncDir(root); err != nil {
		return "", "", fmt.Errorf("freeze: %w", err)
	}
	return final, digest, nil
}
