package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pipec/pipec/internal/atomicfile"
	"github.com/pipec/pipec/internal/fswalk"
	"github.com/pipec/pipec/runtime/sink"
)

// Folder is a Store in a directory, meant to be on a filesystem every worker
// mounts (each at its own path, if need be: the state records keys, not
// paths):
//
//	ROOT/<pipeline>/<artifact>/<hex digest>/   one version, files read-only
//	ROOT/<pipeline>/<artifact>/.tmp-*/         a put in progress, or its crash leftover
//
// A put from another filesystem copies into a temporary folder beside the
// final one, fsyncs every file and folder, renames it into place and fsyncs
// the parent (sink.Freeze); from the same filesystem it renames the frozen
// folder (durable already) into place and fsyncs the parent; a version the
// runtime froze into the store itself is found in place. Either way a
// version is either all there, durable, or not there at all: a reader
// never sees part of one, and a crash leaves only a .tmp- folder, which Get
// and List ignore and pipec gc removes. Files are read-only (0444) and
// nothing ever writes into a version folder again; the folders keep their
// write bit so that removing a store (rm -r, gc) needs no chmod.
type Folder struct {
	// Root is the store's absolute path on this machine.
	Root string
}

var _ Store = (*Folder)(nil)

// NewFolder is the folder store at root, an absolute path (a spec's relative
// one is resolved against the spec's folder before).
func NewFolder(root string) (*Folder, error) {
	if root == "" {
		return nil, errors.New("artifact store: no folder given")
	}
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("artifact store %q: the folder must be an absolute path", root)
	}
	// Refused here, before a run starts a task, rather than when the first
	// output is put (a folder that is not there yet is made then).
	if fi, err := os.Stat(root); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("artifact store %s: not a folder", root)
	}
	return &Folder{Root: filepath.Clean(root)}, nil
}

// Path is where k's folder is in the store, whether or not it is there.
func (f *Folder) Path(k Key) string {
	return filepath.Join(f.Root, k.Pipeline, k.Artifact, k.hex())
}

// OnFilesystemOf reports whether dir is on the store's filesystem. A
// worker whose state folder is there freezes its outputs straight into the
// store (runtime's produce), as a local run does into its default store:
// the put then finds the version in place, with no copy or rename to make.
func (f *Folder) OnFilesystemOf(dir string) bool { return sameFilesystem(f.Root, dir) }

// Put implements Store. dir may be k's own folder in this store already (a
// local run freezes straight into its default store); then it is kept.
// Otherwise a frozen folder on the store's filesystem is moved in with one
// rename (its files and folders were fsynced when it was frozen), and one on
// another filesystem is copied; either way dir is not to be used after Put.
func (f *Folder) Put(ctx context.Context, k Key, dir string) error {
	if err := k.check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	final := f.Path(k)
	if fi, err := os.Stat(final); err == nil && fi.IsDir() {
		return nil // content-addressed: the same key is the same bytes
	}
	parent := filepath.Dir(final)
	if err := atomicfile.MkdirAll(parent); err != nil {
		return fmt.Errorf("artifact store %s: %w", f.Root, err)
	}
	if err := os.Rename(dir, final); err == nil {
		if err := atomicfile.SyncDir(parent); err != nil {
			return fmt.Errorf("artifact store %s: put %s: %w", f.Root, k, err)
		}
		_ = atomicfile.SyncDir(filepath.Dir(dir))
		return nil
	}
	if fi, err := os.Stat(final); err == nil && fi.IsDir() {
		return nil // another writer of the same bytes renamed first
	}
	// Another filesystem (EXDEV), or a folder that cannot be moved: copy.
	got, digest, err := sink.Freeze(dir, parent)
	if err != nil {
		return fmt.Errorf("artifact store %s: put %s: %w", f.Root, k, err)
	}
	if digest != k.Digest {
		// Stored under its own digest, where nothing refers to it: gc
		// removes it. The key's version is not there.
		return fmt.Errorf("artifact store %s: put %s: %s has digest %s now, not the key's (changed after it was frozen)", f.Root, k, dir, digest)
	}
	if got != final {
		return fmt.Errorf("artifact store %s: put %s: stored at %s", f.Root, k, got)
	}
	return nil
}

// Get implements Store.
func (f *Folder) Get(_ context.Context, k Key) (string, error) {
	if err := k.check(); err != nil {
		return "", err
	}
	p := f.Path(k)
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) || err == nil && !fi.IsDir() {
		return "", fmt.Errorf("version %s: %w %s", k, ErrNotFound, f.Root)
	}
	if err != nil {
		return "", fmt.Errorf("artifact store %s: %w", f.Root, err)
	}
	return p, nil
}

// Has implements Store.
func (f *Folder) Has(_ context.Context, k Key) (bool, error) {
	if err := k.check(); err != nil {
		return false, err
	}
	fi, err := os.Stat(f.Path(k))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("artifact store %s: %w", f.Root, err)
	}
	return fi.IsDir(), nil
}

// Remove implements Store.
func (f *Folder) Remove(_ context.Context, k Key) error {
	if err := k.check(); err != nil {
		return err
	}
	if err := removeVersionFolder(f.Path(k)); err != nil {
		return fmt.Errorf("artifact store %s: remove %s: %w", f.Root, k, err)
	}
	return nil
}

// Drop implements Store: the store's folder is the one readers get.
func (f *Folder) Drop(ctx context.Context, k Key) error { return f.Remove(ctx, k) }

// removeVersionFolder removes a version's folder p, renamed out of the way
// first, so no reader finds a version half removed; one not there is no
// error.
func removeVersionFolder(p string) error {
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(p), ".tmp-rm-")
	if err != nil {
		return err
	}
	if err := os.Rename(p, filepath.Join(tmp, filepath.Base(p))); err != nil {
		os.Remove(tmp)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile
		}
		return err
	}
	return os.RemoveAll(tmp)
}

// List implements Store.
func (f *Folder) List(context.Context) ([]Key, error) {
	var out []Key
	err := fswalk.AtDepth(f.Root, 3, IsTemp, func(p string, parts []string, d fs.DirEntry) {
		if !d.IsDir() || IsTemp(parts[2]) {
			return
		}
		if k, err := NewKey(parts[0], parts[1], "sha256:"+parts[2]); err == nil {
			out = append(out, k)
		}
	})
	slices.SortFunc(out, func(a, b Key) int { return strings.Compare(a.String(), b.String()) })
	return out, err
}

// Temp is an unfinished put (or a removal's leftover) in a folder store.
type Temp struct {
	Path     string
	Modified time.Time
}

// Temps lists the unfinished puts and removals under the store's version
// folders: those older than any put could still be running are crash
// leftovers (pipec gc removes them).
func (f *Folder) Temps() ([]Temp, error) {
	var out []Temp
	err := fswalk.AtDepth(f.Root, 3, IsTemp, func(p string, parts []string, d fs.DirEntry) {
		if !IsTemp(parts[2]) {
			return
		}
		if info, err := d.Info(); err == nil {
			out = append(out, Temp{Path: p, Modified: info.ModTime()})
		}
	})
	slices.SortFunc(out, func(a, b Temp) int { return strings.Compare(a.Path, b.Path) })
	return out, err
}

// ownerPath is where the owner of pipeline's versions is recorded.
func (f *Folder) ownerPath(pipeline string) string {
	return filepath.Join(f.Root, ownersDir, pipeline+".json")
}

// ReadOwner implements Store.
func (f *Folder) ReadOwner(_ context.Context, pipeline string) ([]byte, string, error) {
	p := f.ownerPath(pipeline)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		err = ErrNotFound
	}
	return data, p, err
}

// WriteOwner implements Store: written beside, synced and linked into
// place (create-only: a link never replaces its target) or renamed.
func (f *Folder) WriteOwner(_ context.Context, pipeline string, data []byte, replace bool) (bool, error) {
	p := f.ownerPath(pipeline)
	if err := atomicfile.MkdirAll(filepath.Dir(p)); err != nil {
		return false, err
	}
	if replace {
		return true, atomicfile.Write(p, data, 0o644)
	}
	err := atomicfile.Create(p, data, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	return err == nil, err
}

func (f *Folder) String() string { return f.Root }
