// Package sink implements write-audit-publish: per-attempt staging
// directories, content digests, and the directory sink that makes one audited
// version visible at a time by swapping a link after a fenced compare-and-swap
// in the store.
package sink

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pipec/pipec/internal/atomicfile"
	"github.com/pipec/pipec/internal/filekind"
)

// StagingRoot is where attempts stage their outputs, relative to the state
// directory's parent (the working directory of pipec run).
const StagingRoot = ".pipec/staging"

// StagingPath is the staging directory of one output of one attempt:
// ROOT/<run>/<task>/<attempt>/<artifact>. A run id holds slashes
// ("orders/2024-01-01/r1") and becomes nested directories. Every part is
// checked so that no name can climb out of root.
func StagingPath(root, run, task string, attempt int, artifact string) (string, error) {
	if attempt <= 0 {
		return "", fmt.Errorf("staging path: attempt %d is not positive", attempt)
	}
	parts := []string{root}
	for _, p := range strings.Split(run, "/") {
		if err := checkElem("run id", p); err != nil {
			return "", err
		}
		parts = append(parts, p)
	}
	for _, p := range [][2]string{{"task", task}, {"artifact", artifact}} {
		if err := checkElem(p[0], p[1]); err != nil {
			return "", err
		}
	}
	parts = append(parts, task, strconv.Itoa(attempt), artifact)
	return filepath.Join(parts...), nil
}

// NewStaging creates a fresh, empty staging directory for one output of one
// attempt and returns its path. Attempt numbers are never reused, so anything
// already there is debris of a crash of this very attempt before it started,
// and is removed.
func NewStaging(root, run, task string, attempt int, artifact string) (string, error) {
	dir, err := StagingPath(root, run, task, attempt, artifact)
	if err != nil {
		return "", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("staging: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", fmt.Errorf("staging: %w", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("staging: %w", err)
	}
	return dir, nil
}

// checkElem refuses a name that is not one plain path element.
func checkElem(what, s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, `/\`+"\x00") {
		return fmt.Errorf("%s %q is not a plain name", what, s)
	}
	return nil
}

// Digest is "sha256:<hex>" over a directory's content: every entry in
// sorted order of its slash-separated relative path, a directory as
// "d\x00path\x00", a regular file as "f\x00path\x00size\x00" followed by its
// bytes. Names and bytes are all that count (not times, not modes), so two
// attempts that write the same data get the same digest. Symbolic links and
// other special files are refused: a version must be self-contained.
func Digest(dir string) (string, error) {
	digest, _, err := walkCopyExcept(dir, "", "")
	return digest, err
}

// entry is one thing under a directory tree, by slash path.
type entry struct {
	rel  string
	dir  bool
	mode fs.FileMode
}

// EntryError is an entry of an output's folder that is neither a file nor a
// folder: a version holds bytes only, never a link to something outside
// it nor a device.
type EntryError struct {
	Rel    string      // slash path under the output's folder; "" for the folder itself
	Type   fs.FileMode // its type bits
	Target string      // a link's target
	Gone   bool        // the output's folder itself was removed
}

func (e *EntryError) Error() string {
	if e.Gone {
		return "the output's folder was removed: a task leaves it in place (empty, for an empty output)"
	}
	what := e.Rel
	if what == "" {
		what = "the output's folder"
	}
	kind := filekind.Of(e.Type)
	if e.Target != "" {
		kind += " (to " + e.Target + ")"
	}
	return fmt.Sprintf("%s is %s: an output holds files and folders only", what, kind)
}

// linkTarget is where a symbolic link at p points ("" for anything else).
func linkTarget(p string, t fs.FileMode) string {
	if t&fs.ModeSymlink == 0 {
		return ""
	}
	target, _ := os.Readlink(p)
	return target
}

// listTree returns the entries under root (root itself excluded), sorted by
// relative slash path.
func listTree(root string) ([]entry, error) {
	// The folder itself first: pipec made it, so a task that removed it,
	// or put a link or a file in its place, is what the error names.
	fi, err := os.Lstat(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &EntryError{Gone: true}
	}
	if err == nil && !fi.IsDir() {
		return nil, &EntryError{Type: fi.Mode().Type(), Target: linkTarget(root, fi.Mode().Type())}
	}
	var out []entry
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			if !d.IsDir() {
				return fmt.Errorf("%s is not a directory", root)
			}
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch t := d.Type(); {
		case t.IsDir():
			out = append(out, entry{rel: rel, dir: true})
		case t.IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			out = append(out, entry{rel: rel, mode: info.Mode().Perm()})
		default:
			return &EntryError{Rel: rel, Type: t, Target: linkTarget(p, t)}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.rel, b.rel) })
	return out, nil
}

// walkCopy hashes the tree at src and copies it into the existing directory
// dst in the same pass. Hashing the bytes as they are copied means the
// digest describes exactly what landed in dst, even if something still
// writes into src. The copy is not yet durable: the caller syncs it
// (treeCopy.sync) once it knows it keeps dst, or discards it, so that a
// copy thrown away (content already frozen) costs no fsync.
func walkCopy(src, dst string) (string, *treeCopy, error) {
	return walkCopyExcept(src, dst, "")
}

// walkCopyExcept is walkCopy leaving out the top-level entry named skip
// (none when empty): a version folder's manifest, for ContentDigest; with
// dst empty it only hashes, and returns no copy.
func walkCopyExcept(src, dst, skip string) (digest string, _ *treeCopy, err error) {
	entries, err := listTree(src)
	if err != nil {
		return "", nil, fmt.Errorf("digest: %w", err)
	}
	h := sha256.New()
	c := &treeCopy{dirs: []string{dst}}
	defer func() {
		if err != nil {
			c.discard()
		}
	}()
	for _, e := range entries {
		if skip != "" && e.rel == skip {
			continue
		}
		if e.dir {
			fmt.Fprintf(h, "d\x00%s\x00", e.rel)
			if dst != "" {
				p := filepath.Join(dst, filepath.FromSlash(e.rel))
				if err := os.Mkdir(p, 0o755); err != nil {
					return "", nil, err
				}
				c.dirs = append(c.dirs, p)
			}
			continue
		}
		out, err := hashFile(h, filepath.Join(src, filepath.FromSlash(e.rel)), e, dst)
		if err != nil {
			return "", nil, err
		}
		if out != nil {
			if err := c.files.add(out); err != nil {
				return "", nil, err
			}
		}
	}
	digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	if dst == "" {
		return digest, nil, nil
	}
	return digest, c, nil
}

// treeCopy is what walkCopy wrote into its dst and has not synced: the
// copied files, open (a full batch of them is synced as it fills, see
// syncBatch), and the directories, dst first.
type treeCopy struct {
	files unsynced
	dirs  []string
}

// sync makes the copy durable: the files, then the directories children
// before parents, so that each directory's entries are durable before the
// directory naming it is synced; dst itself too unless the caller adds
// more to it and syncs it after (top false).
func (c *treeCopy) sync(top bool) error {
	if err := c.files.sync(); err != nil {
		return err
	}
	last := 0
	if !top {
		last = 1
	}
	for i := len(c.dirs) - 1; i >= last; i-- {
		if err := atomicfile.SyncDir(c.dirs[i]); err != nil {
			return err
		}
	}
	return nil
}

// discard closes the copies without syncing them: their folder is removed.
func (c *treeCopy) discard() { c.files.close() }

// hashFile feeds one file into h and, when dst is set, copies it there
// read-only and returns the copy open and not yet fsynced (see unsynced).
func hashFile(h hash.Hash, path string, e entry, dst string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	size := info.Size()
	fmt.Fprintf(h, "f\x00%s\x00%d\x00", e.rel, size)
	var w io.Writer = h
	var out *os.File
	if dst != "" {
		// Read-only: a published version is immutable. Execute bits are kept.
		out, err = os.OpenFile(filepath.Join(dst, filepath.FromSlash(e.rel)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444|(e.mode&0o111))
		if err != nil {
			return nil, err
		}
		w = io.MultiWriter(h, out)
	}
	n, err := io.Copy(w, f)
	if err == nil && n != size {
		err = fmt.Errorf("%s changed while it was read (%d bytes, stat said %d)", path, n, size)
	}
	if err != nil {
		if out != nil {
			out.Close()
		}
		return nil, err
	}
	return out, nil
}

// syncBatch is how many copied files wait, written and open, for their
// fsyncs. Each copy's writeback starts as soon as it is written
// (startWriteback) and the batch is fsynced after: the disk writes overlap,
// and the first fsync's journal commit (ext4, XFS) carries the others'
// names, where a sync right after each copy waited for its own writes and
// commit in turn (BenchmarkFreezeManyFiles: 200 files of 8 KiB froze in
// about 50 ms instead of 150 on an ext4 with a journal). The batch bounds
// the descriptors a large version holds open.
const syncBatch = 64

// unsynced is the copies of a version not yet fsynced, in the order they
// were written.
type unsynced []*os.File

// add keeps f for the next sync, syncing the batch once it is full.
func (u *unsynced) add(f *os.File) error {
	startWriteback(f)
	*u = append(*u, f)
	if len(*u) < syncBatch {
		return nil
	}
	return u.sync()
}

// sync fsyncs and closes every file kept, and reports the first failure.
func (u *unsynced) sync() error {
	var first error
	for _, f := range *u {
		if err := f.Sync(); err != nil && first == nil {
			first = err
		}
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	*u = (*u)[:0]
	return first
}

// close closes what a copy not kept left unsynced: its folder is removed.
func (u *unsynced) close() {
	for _, f := range *u {
		f.Close()
	}
	*u = nil
}
