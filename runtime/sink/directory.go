package sink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pipec/pipec/runtime/store"
)

// Fencing modes of a sink, as written in the spec.
const (
	FencingToken = "token"
	FencingNone  = "none"
)

// VersionsDir is the folder under a directory sink's path that holds the
// immutable published versions. Readers never need it: they read
// PATH/<interval>/.
const VersionsDir = ".versions"

// Directory is the "directory" sink. PATH/<interval> is a symbolic link to an
// immutable copy of the published version under PATH/.versions/; publishing a
// new version renames a new link over the old one, which POSIX makes atomic, so
// a reader that resolves PATH/<interval> once sees the old version or the new
// one, never a mix. Published copies are never modified or removed by pipec, so
// a reader holding the old one keeps reading it whole.
//
// One directory sink path holds one artifact: the visible name is only the
// interval. The layout:
//
//	PATH/2024-01-01 -> .versions/orders_clean@2024-01-01#sha256-….t8   what readers read
//	PATH/.versions/orders_clean@2024-01-01#sha256-….t8/                immutable copies, files read-only,
//	                                                                    with _pipec.json (lineage)
//	PATH/.lock                                                       serializes link swaps (flock)
type Directory struct {
	// Name is the sink's name in the spec, the pointer's key in the store.
	Name string
	// Path is the sink's directory.
	Path string
	// Fencing is FencingToken or FencingNone.
	Fencing string
	Store   store.Store
	// Lineage, if set, supplies the pipeline and the accepting checks for
	// each version's manifest (see manifest.go).
	Lineage Lineage
}

// NewDirectory checks a directory sink's settings (from compiler.PlanSink:
// Name, Path, Fencing) and builds it. path should already be resolved against
// the spec's folder.
func NewDirectory(name, path, fencing string, st store.Store) (*Directory, error) {
	if fencing != FencingToken && fencing != FencingNone {
		return nil, fmt.Errorf("sink %q: fencing %q is neither %q nor %q", name, fencing, FencingToken, FencingNone)
	}
	if name == "" || path == "" {
		return nil, fmt.Errorf("sink %q: a directory sink needs a name and a path", name)
	}
	if st == nil {
		return nil, fmt.Errorf("sink %q: no store", name)
	}
	return &Directory{Name: name, Path: path, Fencing: fencing, Store: st}, nil
}

// Result is what a publish did.
type Result struct {
	// Outcome is the compare-and-swap's: Won and Idempotent made the version
	// visible (or kept it so); Fenced changed nothing, a newer token holds the
	// pointer; Conflict (PublishIf only) changed nothing, the pointer moved.
	Outcome store.CASOutcome
	// Unfenced is true for a sink with fencing = "none": the token was not
	// compared, the publish is at-least-once and a stale attempt can
	// overwrite a newer one. Say so in the run summary.
	Unfenced bool
	Version  store.Version
	// VersionDir is the immutable copy of Version in the sink.
	VersionDir string
	// Visible is PATH/<interval>, the name readers use.
	Visible string
	// Pointer is the store's pointer after the call (for Fenced, the newer
	// one that won).
	Pointer store.Pointer
}

// VersionName is the name of a version's immutable folder under
// PATH/.versions: "artifact@interval#sha256-<hex>.t<token>". The token is
// part of the name because the folder holds the version's lineage manifest
// (run, attempt, token) beside the content: two attempts that wrote the same
// bytes get two folders, each with its own true manifest.
func VersionName(v store.Version) string {
	return v.Artifact + "@" + v.Interval + "#" + strings.ReplaceAll(v.Digest, ":", "-") + ".t" + strconv.FormatInt(v.Token, 10)
}

// Publish makes an accepted version visible at PATH/<interval>, in this order:
//
//  1. copy the attempt's staging directory into PATH/.versions/<name>
//     (fsync every file and directory, then rename into place), checking
//     that the copied bytes have the audited digest; skipped when the
//     pointer already holds a newer token (the swap will be fenced);
//  2. compare-and-swap the store's pointer with the version's token (the
//     producing attempt's), durable before it returns;
//  3. only if the swap won or was idempotent, point the link at the store's
//     pointer (see Reconcile).
//
// A crash between 2 and 3 leaves the old version visible and the store ahead;
// publishing the same version again (or Reconcile) completes it without a
// second version. A crash before 2 leaves only an invisible copy.
func (d *Directory) Publish(ctx context.Context, v store.Version) (Result, error) {
	return d.publish(ctx, v, nil)
}

// PublishIf is Publish made optimistic: the swap happens only if the
// store's pointer still holds baseToken (0: nothing published yet), else the
// outcome is store.Conflict and nothing changes. Publishers that race from
// one base then get exactly one winner.
func (d *Directory) PublishIf(ctx context.Context, v store.Version, baseToken int64) (Result, error) {
	return d.publish(ctx, v, &baseToken)
}

func (d *Directory) publish(ctx context.Context, v store.Version, expect *int64) (Result, error) {
	if err := checkNames(v.Artifact, v.Interval); err != nil {
		return Result{}, err
	}
	if v.State != store.VersionAccepted {
		return Result{}, fmt.Errorf("publish %s to %s: version is %s, only an accepted version is published", v.Label(), d.Name, v.State)
	}
	res := Result{Unfenced: d.Fencing == FencingNone, Version: v, Visible: filepath.Join(d.Path, v.Interval),
		VersionDir: filepath.Join(d.Path, VersionsDir, VersionName(v))}
	// A stale attempt need not copy its output only to be fenced: under token
	// fencing a pointer's token never goes down, so a newer token seen now
	// will still be there at the swap, which records the fenced publish.
	copied := false
	if res.Unfenced || !d.alreadyFenced(ctx, v) {
		if err := d.materialize(v); err != nil {
			return Result{}, fmt.Errorf("publish %s to %s: %w", v.Label(), d.Name, err)
		}
		copied = true
	}
	cas, err := d.Store.CompareAndSwapPointer(ctx, store.Swap{
		Sink: d.Name, Artifact: v.Artifact, Interval: v.Interval,
		Version: v.ID, Token: v.Token, Unfenced: res.Unfenced, Expect: expect,
	})
	if err != nil {
		return Result{}, fmt.Errorf("publish %s to %s: %w", v.Label(), d.Name, err)
	}
	res.Outcome, res.Pointer = cas.Outcome, cas.Pointer
	if cas.Outcome != store.Won && cas.Outcome != store.Idempotent {
		return res, nil
	}
	if !copied {
		// Only if the sink's fencing changed under a concurrent publisher;
		// copy now, before the link can name the version.
		if err := d.materialize(v); err != nil {
			return res, fmt.Errorf("publish %s to %s: pointer swapped in the store, copy failed: %w", v.Label(), d.Name, err)
		}
	}
	if _, err := d.Reconcile(ctx, v.Artifact, v.Interval); err != nil {
		return res, fmt.Errorf("publish %s to %s: pointer swapped in the store, link not yet: %w", v.Label(), d.Name, err)
	}
	return res, nil
}

// alreadyFenced reports whether the store's pointer already holds a token
// that fences v. A failed read says no: the swap decides.
func (d *Directory) alreadyFenced(ctx context.Context, v store.Version) bool {
	p, err := d.Store.Pointer(ctx, d.Name, v.Artifact, v.Interval)
	if err != nil {
		return false
	}
	return p.Token > v.Token || (p.Token == v.Token && p.Version != v.ID)
}

// materialize copies the version's staging directory into its immutable
// folder, unless an earlier publish of the same content already did.
func (d *Directory) materialize(v store.Version) error {
	_, err := d.materializeDir(v)
	return err
}

func (d *Directory) materializeDir(v store.Version) (string, error) {
	versions := filepath.Join(d.Path, VersionsDir)
	final := filepath.Join(versions, VersionName(v))
	if fi, err := os.Stat(final); err == nil && fi.IsDir() {
		return final, nil // content-addressed: the same digest is the same bytes
	}
	if err := os.MkdirAll(versions, 0o755); err != nil {
		return "", err
	}
	if v.StagingPath == "" {
		return "", fmt.Errorf("version has no staging path")
	}
	if err := refuseReserved(v.StagingPath); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(versions, ".tmp-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	digest, err := walkCopy(v.StagingPath, tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("copy from staging: %w", err)
	}
	if digest != v.Digest {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("staging changed after the audit: digest %s, audited %s", digest, v.Digest)
	}
	// The manifest goes in before the rename, so no published folder is
	// ever without it.
	if err := writeManifest(tmp, manifestOf(v, d.Lineage)); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := syncDir(tmp); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		os.RemoveAll(tmp)
		// Another publisher of the same content got there first.
		if fi, serr := os.Stat(final); serr == nil && fi.IsDir() {
			return final, nil
		}
		return "", err
	}
	if err := syncDir(versions); err != nil {
		return "", err
	}
	return final, nil
}

// Reconcile makes PATH/<interval> show the version the store's pointer names,
// and reports whether it had to change the link. It completes a publish that
// won in the store but crashed before its link swap, and it is what every
// publish runs after its swap.
//
// It holds an exclusive lock on PATH/.lock while it reads the pointer and
// swaps the link, so link swaps happen in pointer order: two publishers that
// won one after the other cannot leave the older one visible; the link ends
// at whatever the store's pointer names last.
func (d *Directory) Reconcile(ctx context.Context, artifact, interval string) (bool, error) {
	if err := checkNames(artifact, interval); err != nil {
		return false, err
	}
	if err := os.MkdirAll(d.Path, 0o755); err != nil {
		return false, err
	}
	unlock, err := lockFile(filepath.Join(d.Path, ".lock"))
	if err != nil {
		return false, err
	}
	defer unlock()

	p, err := d.Store.Pointer(ctx, d.Name, artifact, interval)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	v, err := d.Store.GetVersion(ctx, p.Version)
	if err != nil {
		return false, err
	}
	target := filepath.Join(VersionsDir, VersionName(v))
	if fi, err := os.Stat(filepath.Join(d.Path, target)); err != nil || !fi.IsDir() {
		return false, fmt.Errorf("published version %s is missing from %s: %v", v.Label(), d.Path, err)
	}
	link := filepath.Join(d.Path, interval)
	if cur, err := os.Readlink(link); err == nil && cur == target {
		return false, nil
	}
	if fi, err := os.Lstat(link); err == nil && fi.Mode()&fs.ModeSymlink == 0 {
		return false, fmt.Errorf("%s exists and is not a link pipec made; move it away", link)
	}
	tmp := filepath.Join(d.Path, ".link-"+interval+"-"+randomSuffix())
	if err := os.Symlink(target, tmp); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return false, err
	}
	if err := syncDir(d.Path); err != nil {
		return true, err
	}
	return true, nil
}

// ReconcileAll reconciles every pointer the store holds for this sink, e.g.
// when a run starts after a crash, and removes temporary links a crash left
// behind. It returns how many links it changed. (Unfinished copies under
// PATH/.versions/.tmp-* are left alone: another publisher may be writing
// one right now. They are never visible.)
func (d *Directory) ReconcileAll(ctx context.Context) (int, error) {
	if err := d.removeStaleLinks(); err != nil {
		return 0, err
	}
	ps, err := d.Store.Pointers(ctx, d.Name)
	if err != nil {
		return 0, err
	}
	changed := 0
	var errs []error
	for _, p := range ps {
		ok, err := d.Reconcile(ctx, p.Artifact, p.Interval)
		if ok {
			changed++
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return changed, errors.Join(errs...)
}

// removeStaleLinks deletes PATH/.link-* left by a crash between creating a
// temporary link and renaming it. Links are only made under the lock, so
// holding it, every one found is debris.
func (d *Directory) removeStaleLinks() error {
	if _, err := os.Stat(d.Path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	unlock, err := lockFile(filepath.Join(d.Path, ".lock"))
	if err != nil {
		return err
	}
	defer unlock()
	stale, err := filepath.Glob(filepath.Join(d.Path, ".link-*"))
	if err != nil {
		return err
	}
	for _, p := range stale {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Visible resolves PATH/<interval> once and returns the immutable version
// folder it shows now, or an error wrapping fs.ErrNotExist when nothing is
// published. A reader that reads several files should read them all from the
// returned folder: resolving the link again per file could see a newer
// publish halfway through.
func (d *Directory) Visible(interval string) (string, error) {
	if err := checkElem("interval", interval); err != nil {
		return "", err
	}
	target, err := os.Readlink(filepath.Join(d.Path, interval))
	if err != nil {
		return "", err
	}
	if filepath.IsAbs(target) {
		return target, nil
	}
	return filepath.Join(d.Path, target), nil
}

// checkNames refuses artifact and interval names that could escape the sink
// or collide with its own dot-files.
func checkNames(artifact, interval string) error {
	if err := checkElem("artifact", artifact); err != nil {
		return err
	}
	if err := checkElem("interval", interval); err != nil {
		return err
	}
	if strings.HasPrefix(interval, ".") {
		return fmt.Errorf("interval %q starts with a dot", interval)
	}
	return nil
}

func randomSuffix() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
