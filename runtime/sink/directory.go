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

	"github.com/pipec/pipec/internal/atomicfile"
	"github.com/pipec/pipec/runtime/fence"
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
// The sink enforces the token itself: PATH/.fence/<interval>.json records
// the highest token it accepted for the interval and the state that issued
// it, and PATH/.fence/.binding.json the one state it takes publishes from
// (the first that published, until `pipec sink adopt` moves it). Both are
// changed only under PATH/.lock, with the link swap's durability. A publish
// not above the record is fenced whatever the state database says, and a
// publish from another state is refused.
//
// One directory sink path holds one artifact: the visible name is only the
// interval. The layout:
//
//	PATH/2024-01-01 -> .versions/orders_clean@2024-01-01#sha256-….t8   what readers read
//	PATH/.versions/orders_clean@2024-01-01#sha256-….t8/                immutable copies, files read-only,
//	                                                                    with _pipec.json (lineage)
//	PATH/.fence/2024-01-01.json                                         the interval's fencing record
//	PATH/.fence/.binding.json                                           the state the sink is bound to
//	PATH/.lock                                                          serializes decisions and link swaps (flock)
type Directory struct {
	// Name is the sink's name in the spec, the pointer's key in the store.
	Name string
	// Path is the sink's directory.
	Path string
	// Fencing is FencingToken or FencingNone.
	Fencing string
	Store   store.Store
	// Pipeline is the pipeline whose pointers ReconcileAll reads; publishes
	// take it from the version.
	Pipeline string
	// StatePath names the store in messages (where to find it, for a person
	// told to use it); the store's StateID is the identity.
	StatePath string
	// Lineage, if set, supplies the pipeline and the accepting checks for
	// each version's manifest (see manifest.go).
	Lineage Lineage
	// Shown, if set, is what earlier runs of this process saw the links
	// show: ReconcileAll reads again only the links whose pointer changed.
	Shown *Shown
	// Files, if set, is where this machine reads a version's files: the
	// runtime's artifact store (runtime/artifacts), since the version's
	// Location is a key in it. Nil: the Location is the folder itself.
	Files Files
}

// Files returns the folder on this machine that holds v's files.
type Files func(ctx context.Context, v store.Version) (string, error)

var _ Sink = (*Directory)(nil)

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
	// Outcome is the fencing decision: Won and Idempotent made the version
	// visible (or kept it so); Fenced changed nothing, a newer token holds
	// the sink, the store's pointer, or was granted to the producing task;
	// Conflict (PublishIf only) changed nothing, the pointer moved.
	Outcome store.CASOutcome
	// FencedBy says who refused a Fenced publish: "sink" (its own record),
	// "pointer" (the store's pointer) or "grant" (a newer attempt of the
	// producing task holds a higher token).
	FencedBy string
	// HeldToken is the token that fenced the publish.
	HeldToken int64
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
	// generation is the sink's pointer generation a Won swap made.
	generation int64
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
//     that the copied bytes have the audited digest; skipped when the sink
//     already holds a newer token (the publish will be fenced);
//  2. under PATH/.lock: refuse a state the sink is not bound to (binding
//     the sink to this state on its first publish), and judge the token
//     against the sink's record (fence.Decide);
//  3. still under the lock, compare-and-swap the store's pointer (which
//     also fences at grant), durable before it returns;
//  4. if both accepted, write the sink's record durably, then swap the link.
//
// A crash between 3 and 4 leaves the old version visible and the store
// ahead; publishing the same version again (or ReconcileAll) completes it
// without a second version. A crash before 3 leaves only an invisible copy.
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
	fenced := d.Fencing != FencingNone
	res := Result{Unfenced: !fenced, Version: v, Visible: filepath.Join(d.Path, v.Interval),
		VersionDir: filepath.Join(d.Path, VersionsDir, VersionName(v))}
	stateID, err := d.Store.StateID(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("publish %s to %s: %w", v.Label(), d.Name, err)
	}
	// A state the sink is not bound to copies nothing (checked again under
	// the lock; only an adoption changes the binding).
	if b, err := d.readBinding(); err == nil && b != nil && b.State != stateID {
		return Result{}, fmt.Errorf("publish %s: %w", v.Label(),
			&ForeignStateError{Sink: d.Name, Path: d.Path, Bound: *b, State: stateID, StatePath: d.StatePath})
	}
	// A stale attempt need not copy its output only to be fenced: the
	// sink's record never goes down, so a newer token seen now will still
	// be there under the lock.
	copied := false
	if rec, err := d.readRecord(v.Interval); err != nil || rec == nil ||
		fence.Decide(rec.held(), v.Token, VersionName(v), fenced) != fence.Fenced {
		if err := d.materialize(ctx, v); err != nil {
			return Result{}, fmt.Errorf("publish %s to %s: %w", v.Label(), d.Name, err)
		}
		copied = true
	}
	if err := os.MkdirAll(d.Path, 0o755); err != nil {
		return Result{}, err
	}
	unlock, err := lockFile(filepath.Join(d.Path, ".lock"))
	if err != nil {
		return Result{}, err
	}
	defer unlock()

	if err := d.checkBinding(stateID, v); err != nil {
		return Result{}, fmt.Errorf("publish %s: %w", v.Label(), err)
	}
	rec, err := d.readRecord(v.Interval)
	if err != nil {
		return Result{}, fmt.Errorf("publish %s to %s: %w", v.Label(), d.Name, err)
	}
	if rec != nil && (rec.Pipeline != v.Pipeline || rec.Artifact != v.Artifact) {
		return Result{}, &OtherArtifactError{Sink: d.Name, Path: d.Path, Held: *rec, Pipeline: v.Pipeline, Artifact: v.Artifact}
	}
	decision := fence.Accept
	if rec != nil {
		decision = fence.Decide(rec.held(), v.Token, VersionName(v), fenced)
	}
	if decision == fence.Fenced {
		return res, fencedBySink(ctx, d.Store, d.Name, v, rec, &res)
	}
	won, err := swapInStore(ctx, d.Store, d.Name, v, expect, &res)
	if err != nil {
		return Result{}, err
	}
	if !won {
		return res, nil
	}
	if !copied {
		if err := d.materialize(ctx, v); err != nil {
			return res, fmt.Errorf("publish %s to %s: pointer swapped in the store, copy failed: %w", v.Label(), d.Name, err)
		}
	}
	if err := d.accept(v, stateID); err != nil {
		return res, fmt.Errorf("publish %s to %s: pointer swapped in the store, sink not yet: %w", v.Label(), d.Name, err)
	}
	if res.Outcome == store.Won && fenced {
		d.Shown.swapped(d, res.Pointer, res.generation)
	}
	return res, nil
}

// held is the record as the fencing rule sees it.
func (r *Record) held() fence.Held {
	if r == nil {
		return fence.Held{}
	}
	return fence.Held{Exists: true, Token: r.Token, Version: r.Version}
}

// checkBinding judges the sink's binding for v from stateID
// (judgeBinding) and records what it says to. The caller holds the lock.
func (d *Directory) checkBinding(stateID string, v store.Version) error {
	b, err := d.readBinding()
	if err != nil {
		return err
	}
	write, err := judgeBinding(d.Name, d.Path, stateID, d.StatePath, b, d.Records, v)
	if err != nil || write == nil {
		return err
	}
	return d.writeBinding(*write)
}

// accept records v as the interval's highest accepted token and points the
// link at it. The caller holds the lock and has decided.
func (d *Directory) accept(v store.Version, stateID string) error {
	rec := Record{Pipeline: v.Pipeline, Artifact: v.Artifact, Interval: v.Interval, Token: v.Token, Version: VersionName(v),
		Digest: v.Digest, State: stateID, Run: v.Run, Attempt: v.Attempt}
	if cur, err := d.readRecord(v.Interval); err != nil {
		return err
	} else if cur == nil || *cur != rec {
		if err := d.writeRecord(rec); err != nil {
			return err
		}
	}
	_, err := d.swapLink(v.Interval, rec.Version)
	return err
}

// materialize copies the version's files (from the artifact store) into its
// immutable folder, unless an earlier publish of the same content already
// did.
func (d *Directory) materialize(ctx context.Context, v store.Version) error {
	_, err := d.materializeDir(ctx, v)
	return err
}

func (d *Directory) materializeDir(ctx context.Context, v store.Version) (string, error) {
	versions := filepath.Join(d.Path, VersionsDir)
	final := filepath.Join(versions, VersionName(v))
	if fi, err := os.Stat(final); err == nil && fi.IsDir() {
		return final, nil // content-addressed: the same digest is the same bytes
	}
	if err := os.MkdirAll(versions, 0o755); err != nil {
		return "", err
	}
	if v.Location == "" {
		return "", fmt.Errorf("version has no location")
	}
	src := v.Location
	if d.Files != nil {
		var err error
		if src, err = d.Files(ctx, v); err != nil {
			return "", err
		}
	}
	if err := refuseReserved(src); err != nil {
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
	digest, copied, err := walkCopy(src, tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("copy from %s: %w", src, err)
	}
	if digest != v.Digest {
		copied.discard()
		os.RemoveAll(tmp)
		return "", fmt.Errorf("staging changed after the audit: digest %s, audited %s", digest, v.Digest)
	}
	// The copy is synced but for tmp itself, which is synced once, after
	// the manifest is in: it goes in before the rename, so no published
	// folder is ever without it.
	if err := copied.sync(false); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := writeManifest(tmp, manifestOf(v, d.Lineage)); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := atomicfile.SyncDir(tmp); err != nil {
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
	if err := atomicfile.SyncDir(versions); err != nil {
		return "", err
	}
	return final, nil
}

// Reconcile makes PATH/<interval> show what the sink's own record says, and
// reports whether it had to change the link. Before that it completes a
// publish of this state that won in the store but crashed before the sink
// took it: when the store's pointer holds a higher token than the sink's
// record (and the sink is bound to this state), the pointer's version is
// accepted as a publish would. It never moves the link to an older version
// or to one of another state: the record's token only grows.
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
	return d.reconcileLocked(ctx, artifact, interval)
}

func (d *Directory) reconcileLocked(ctx context.Context, artifact, interval string) (bool, error) {
	rec, err := d.readRecord(interval)
	if err != nil {
		return false, err
	}
	var (
		p     *store.Pointer
		state catchUpState
	)
	if d.Pipeline != "" {
		got, err := d.Store.Pointer(ctx, d.Pipeline, d.Name, artifact, interval)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return false, err
		}
		if err == nil {
			p = &got
			if state, err = d.catchUpState(ctx); err != nil {
				return false, err
			}
		}
	}
	return d.settle(ctx, artifact, interval, rec, p, state)
}

// catchUpState is what a catch-up needs to know of the sink beside an
// interval's record and pointer: the store's state id, and whether the
// sink is bound to it (a pointer of a state the sink is not bound to says
// nothing there).
type catchUpState struct {
	id    string
	bound bool
	// adoptions is how many adoptions the binding records.
	adoptions int
}

func (d *Directory) catchUpState(ctx context.Context) (catchUpState, error) {
	b, err := d.readBinding()
	if err != nil {
		return catchUpState{}, err
	}
	id, err := d.Store.StateID(ctx)
	if err != nil {
		return catchUpState{}, err
	}
	st := catchUpState{id: id, bound: b != nil && b.State == id}
	if b != nil {
		st.adoptions = len(b.Adoptions)
	}
	return st, nil
}

// settle brings one interval in line, the caller holding the lock: the
// store's pointer p (nil: none) accepted into the record when the store is
// ahead of it, then the link pointed at what the record says.
func (d *Directory) settle(ctx context.Context, artifact, interval string, rec *Record, p *store.Pointer, state catchUpState) (bool, error) {
	if p != nil && state.bound {
		caught, err := d.catchUp(ctx, artifact, rec, *p, state.id)
		if err != nil {
			return false, err
		}
		if caught != nil {
			rec = caught
		}
	}
	if rec == nil {
		return false, nil
	}
	return d.swapLink(interval, rec.Version)
}

// catchUp accepts the store's pointer p into the sink when the store is
// ahead of the sink's record rec (a crash between the swap and the record),
// and returns the record it wrote (nil: none). The sink is bound to the
// state stateID.
func (d *Directory) catchUp(ctx context.Context, artifact string, rec *Record, p store.Pointer, stateID string) (*Record, error) {
	if rec != nil && (rec.Pipeline != d.Pipeline || rec.Artifact != artifact) {
		return nil, nil
	}
	fenced := d.Fencing != FencingNone
	// A fenced record at or above the pointer's token is never behind it
	// (fence.Decide: the same token is the same version or fenced), which
	// is every interval of a sink that nothing crashed on: its version is
	// not read.
	if fenced && rec != nil && p.Token <= rec.Token {
		return nil, nil
	}
	v, err := d.Store.GetVersion(ctx, p.Version)
	if err != nil {
		return nil, err
	}
	if fence.Decide(rec.held(), p.Token, VersionName(v), fenced) != fence.Accept {
		return nil, nil
	}
	if fi, err := os.Stat(filepath.Join(d.Path, VersionsDir, VersionName(v))); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("published version %s is missing from %s: %v", v.Label(), d.Path, err)
	}
	caught := Record{Pipeline: v.Pipeline, Artifact: v.Artifact, Interval: v.Interval, Token: v.Token,
		Version: VersionName(v), Digest: v.Digest, State: stateID, Run: v.Run, Attempt: v.Attempt}
	if err := d.writeRecord(caught); err != nil {
		return nil, err
	}
	return &caught, nil
}

// swapLink points PATH/<interval> at .versions/<version>, atomically, and
// reports whether it changed. The caller holds the lock.
func (d *Directory) swapLink(interval, version string) (bool, error) {
	target := filepath.Join(VersionsDir, version)
	if fi, err := os.Stat(filepath.Join(d.Path, target)); err != nil || !fi.IsDir() {
		return false, fmt.Errorf("published version %s is missing from %s: %v", version, d.Path, err)
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
	if err := atomicfile.SyncDir(d.Path); err != nil {
		return true, err
	}
	return true, nil
}

// ReconcileAll reconciles every interval the sink has a record for, and
// every pointer the store holds for this pipeline's sink, e.g. when a run
// starts after a crash, and removes temporary links a crash left behind. It
// returns how many links it changed. (Unfinished copies under
// PATH/.versions/.tmp-* are left alone: another publisher may be writing
// one right now. They are never visible.)
func (d *Directory) ReconcileAll(ctx context.Context) (int, error) {
	if _, err := os.Stat(d.Path); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	// Every run's start does this: a backfill's thousandth run must not
	// pay a lock, a query and a record read for each interval the sink
	// already holds. So one lock, one query for the pointers, and the
	// records read only where the links do not already show the pointers.
	unlock, err := lockFile(filepath.Join(d.Path, ".lock"))
	if err != nil {
		return 0, err
	}
	defer unlock()
	// With a memo of the runs before (Shown): when the store's generation
	// of the sink's pointers is the one at which every link was seen
	// settled, no pointer moved since but by this process's publishes,
	// which settled their links, and there is nothing to read. The
	// generation is read before the pointers, so a swap that commits in
	// between is seen as a move at the next run's start.
	var (
		ps      []store.Pointer
		state   catchUpState
		settled *settledAt
	)
	if d.Shown != nil && d.Pipeline != "" && d.Fencing != FencingNone {
		g, err := d.Store.PointersGeneration(ctx, d.Pipeline, d.Name)
		if err != nil {
			return 0, err
		}
		if state, err = d.catchUpState(ctx); err != nil {
			return 0, err
		}
		at := settledAt{generation: g, adoptions: state.adoptions}
		if state.bound && d.Shown.isSettled(d, at) {
			return 0, nil
		}
		settled = &at
	}
	if err := d.removeStaleLinksLocked(); err != nil {
		return 0, err
	}
	if d.Pipeline != "" {
		if ps, err = d.Store.Pointers(ctx, d.Pipeline, d.Name); err != nil {
			return 0, err
		}
		if len(ps) > 0 && settled == nil {
			if state, err = d.catchUpState(ctx); err != nil {
				return 0, err
			}
		}
	}
	// An interval whose link shows the token of every pointer the store
	// holds there is settled (shows); the others are read and settled one
	// by one, records first, as they sort.
	type key struct{ artifact, interval string }
	shown := map[string]bool{}
	if state.bound && d.Fencing != FencingNone {
		for _, p := range ps {
			if ok, seen := shown[p.Interval]; !seen || ok {
				shown[p.Interval] = d.Shown.known(d, p) || d.shows(p)
			}
		}
		for _, p := range ps {
			if shown[p.Interval] {
				d.Shown.saw(d, p)
			}
		}
	}
	var keys []key
	records := map[string]*Record{}
	intervals, err := d.recordedIntervals()
	if err != nil {
		return 0, err
	}
	for _, iv := range intervals {
		if shown[iv] {
			continue
		}
		r, err := d.readRecord(iv)
		if err != nil {
			return 0, err
		}
		if r != nil {
			keys = append(keys, key{r.Artifact, r.Interval})
			records[r.Interval] = r
		}
	}
	pointers := map[key]*store.Pointer{}
	for i, p := range ps {
		if shown[p.Interval] {
			continue
		}
		k := key{p.Artifact, p.Interval}
		if r := records[p.Interval]; r == nil || r.Artifact != p.Artifact {
			keys = append(keys, k)
		}
		pointers[k] = &ps[i]
	}
	changed := 0
	var errs []error
	for _, k := range keys {
		if err := checkNames(k.artifact, k.interval); err != nil {
			errs = append(errs, err)
			continue
		}
		ok, err := d.settle(ctx, k.artifact, k.interval, records[k.interval], pointers[k], state)
		if ok {
			changed++
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && settled != nil && state.bound {
		d.Shown.settle(d, *settled)
	}
	return changed, errors.Join(errs...)
}

// shows reports whether PATH/<interval> already shows the version of the
// store's pointer p (a fenced sink bound to p's state): the link names a
// folder of p's artifact and interval made with p's token (one token, one
// attempt, one version of it) and the folder is there. Then the record says
// the same: it is written after the store's swap and before the link's, so
// a record ahead of the link took the pointer past the link's token, and
// fenced swaps never bring it back. A pointer whose last swap skipped the
// token check (fencing = "none" then) is read the long way; one brought
// back by such a swap and then a fenced one, crashing both times, may keep
// the record below what link and pointer agree on until its next publish.
func (d *Directory) shows(p store.Pointer) bool {
	if p.Unfenced {
		return false
	}
	target, err := os.Readlink(filepath.Join(d.Path, p.Interval))
	if err != nil {
		return false
	}
	name, ok := strings.CutPrefix(target, VersionsDir+string(filepath.Separator))
	if !ok {
		return false
	}
	digest, ok := strings.CutPrefix(name, p.Artifact+"@"+p.Interval+"#sha256-")
	if !ok {
		return false
	}
	digest, ok = strings.CutSuffix(digest, ".t"+strconv.FormatInt(p.Token, 10))
	if !ok || digest == "" || strings.Trim(digest, "0123456789abcdef") != "" {
		return false
	}
	fi, err := os.Stat(filepath.Join(d.Path, target))
	return err == nil && fi.IsDir()
}

// removeStaleLinksLocked deletes PATH/.link-* left by a crash between
// creating a temporary link and renaming it. Links are only made under the
// lock, which the caller holds: every one found is debris.
func (d *Directory) removeStaleLinksLocked() error {
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

var _ Managed = (*Directory)(nil)

// Place implements Managed.
func (d *Directory) Place() string { return d.Path }

// SinkName implements Managed.
func (d *Directory) SinkName() string { return d.Name }

// StateStore implements Managed.
func (d *Directory) StateStore() store.Store { return d.Store }

// VisibleVersion implements Managed: the link, resolved once.
func (d *Directory) VisibleVersion(_ context.Context, interval string) (Visible, error) {
	vis := Visible{Pointer: filepath.Join(d.Path, interval)}
	dir, err := d.Visible(interval)
	if err != nil {
		return vis, err
	}
	vis.Location, vis.Name = dir, filepath.Base(dir)
	m, err := ReadManifest(dir)
	if err != nil {
		return vis, fmt.Errorf("no lineage manifest: %w", err)
	}
	vis.Manifest = m
	return vis, nil
}

// Intervals implements Managed: the interval links (dot-files are the
// sink's own).
func (d *Directory) Intervals(context.Context) ([]string, error) {
	return namesIn(d.Path, func(e fs.DirEntry) (string, bool) {
		return e.Name(), !strings.HasPrefix(e.Name(), ".") && e.Type()&fs.ModeSymlink != 0
	})
}

// namesIn lists, in order, what keep makes of the entries of dir that it
// keeps; a dir that does not exist holds none.
func namesIn(dir string, keep func(fs.DirEntry) (string, bool)) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if name, ok := keep(e); ok {
			out = append(out, name)
		}
	}
	return out, nil
}

// FenceRecords implements Managed.
func (d *Directory) FenceRecords(context.Context) (*Binding, []Record, error) {
	b, err := d.readBinding()
	if err != nil {
		return nil, nil, err
	}
	recs, err := d.Records()
	return b, recs, err
}

// HeldVersions implements Managed: the folders under PATH/.versions.
func (d *Directory) HeldVersions(context.Context) (map[string]bool, error) {
	es, err := os.ReadDir(filepath.Join(d.Path, VersionsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	held := make(map[string]bool, len(es))
	for _, e := range es {
		if e.IsDir() {
			held[e.Name()] = true
		}
	}
	return held, nil
}

// PruneVersions implements Managed.
func (d *Directory) PruneVersions(_ context.Context, opts PruneOptions) ([]Pruned, error) {
	return d.Prune(opts)
}
