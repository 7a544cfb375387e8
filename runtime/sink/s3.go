package sink

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pipec/pipec/runtime/fence"
	"github.com/pipec/pipec/runtime/objstore"
	"github.com/pipec/pipec/runtime/store"
)

// S3 is the "s3" sink: a fenced sink in an S3 bucket (or an S3-compatible
// server with conditional writes), path = "s3://bucket/prefix". It keeps the
// directory sink's guarantees with the object store's own atomicity in
// place of a lock and a link:
//
//	PREFIX/2024-01-01                                the interval's pointer: what readers read
//	PREFIX/.versions/orders_clean@2024-01-01#sha256-….t8/…   immutable versions, _pipec.json written last
//	PREFIX/.fence/.binding.json                      the state the sink is bound to
//	PREFIX/.fence/.probe                             the conditional-write probe's object
//
// The pointer object is the interval's fencing record (the Record: highest
// token, version, issuing state, run, attempt, and the version's URL), so
// what readers see and what fences a writer are one object and never
// disagree. It is only ever replaced by a conditional write: created with
// If-None-Match: *, swapped with If-Match on the ETag the writer read and
// judged (fence.Decide). A writer whose swap is refused (someone swapped in
// between) reads and judges again, so of racing writers the highest token
// ends visible and the pointer never goes back. Versions are uploaded under
// keys of their own (name, digest and token), the manifest last, before any
// pointer names them; nothing is ever written over a version.
//
// The binding is created with If-None-Match: * by the first publish, before
// it uploads anything, and moved only by Adopt (If-Match). A server that
// ignores conditional writes is found by a probe at first use, and a fenced
// sink then refuses to publish.
type S3 struct {
	Name    string
	URL     objstore.URL
	Fencing string
	Store   store.Store
	Client  *objstore.Client
	// Pipeline, StatePath, Lineage, Files: as Directory's.
	Pipeline  string
	StatePath string
	Lineage   Lineage
	Files     Files

	probeOnce sync.Once
	probeErr  error
}

var _ Managed = (*S3)(nil)

// beforeSwap, set by tests only, runs when a publish has uploaded its
// version, judged it and won in the store, just before it swaps the pointer.
var beforeSwap func()

// NewS3 checks an s3 sink's settings and builds it; the client comes from
// the AWS configuration of the environment, through cs.
func NewS3(ctx context.Context, name, url, fencing string, st store.Store, cs *objstore.Clients) (*S3, error) {
	if fencing != FencingToken && fencing != FencingNone {
		return nil, fmt.Errorf("sink %q: fencing %q is neither %q nor %q", name, fencing, FencingToken, FencingNone)
	}
	if st == nil {
		return nil, fmt.Errorf("sink %q: no store", name)
	}
	u, err := objstore.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("sink %q: path: %w", name, err)
	}
	c, err := cs.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("sink %q: %w", name, err)
	}
	return &S3{Name: name, URL: u, Fencing: fencing, Store: st, Client: c}, nil
}

func (s *S3) pointerKey(interval string) string { return s.URL.Key(interval) }
func (s *S3) versionKey(name string) string     { return s.URL.Key(VersionsDir, name) + "/" }
func (s *S3) bindingKey() string                { return s.URL.Key(FenceDir, bindingFile) }

// Place implements Managed.
func (s *S3) Place() string { return s.URL.String() }

// SinkName implements Managed.
func (s *S3) SinkName() string { return s.Name }

// StateStore implements Managed.
func (s *S3) StateStore() store.Store { return s.Store }

// NoConditionalWritesError refuses a fenced publish to a server that
// ignores conditional writes.
type NoConditionalWritesError struct {
	Sink string
	Err  error
}

func (e *NoConditionalWritesError) Error() string {
	return fmt.Sprintf("sink %s: %v: pipec cannot fence it, a stale attempt's write would not be refused; "+
		"use a server with conditional writes (AWS S3, MinIO, R2, versitygw), or set fencing = \"none\" on the sink "+
		"to publish at-least-once (pipec lint's unfenced-sink rule says what that risks)", e.Sink, e.Err)
}

func (e *NoConditionalWritesError) Unwrap() error { return e.Err }

// probe checks, once per sink value, that the server honours conditional
// writes; a sink with fencing = "none" does not need them.
func (s *S3) probe(ctx context.Context) error {
	if s.Fencing == FencingNone {
		return nil
	}
	s.probeOnce.Do(func() {
		err := s.Client.Probe(ctx, s.URL, s.URL.Key(FenceDir, ".probe"))
		var nc *objstore.NoConditionalWritesError
		if errors.As(err, &nc) {
			err = &NoConditionalWritesError{Sink: s.Name, Err: err}
		}
		s.probeErr = err
	})
	if s.probeErr != nil {
		err := s.probeErr
		if !errors.As(err, new(*NoConditionalWritesError)) {
			s.probeOnce = sync.Once{} // a network error: probe again next time
		}
		return err
	}
	return nil
}

// readJSONObject reads a small JSON object and its ETag; ok is false when it
// does not exist.
func (s *S3) readJSONObject(ctx context.Context, key string, v any) (etag string, ok bool, err error) {
	b, etag, err := s.Client.Get(ctx, s.URL.Bucket, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return "", false, fmt.Errorf("%s is damaged: %v", s.URL.Of(key), err)
	}
	return etag, true, nil
}

// writeJSONObject writes v at key if the object still has etag ("" : if it
// does not exist). objstore.ErrPrecondition when it changed.
func (s *S3) writeJSONObject(ctx context.Context, key, etag string, v any) error {
	b, err := jsonObject(v)
	if err != nil {
		return err
	}
	cond := objstore.Cond{IfMatch: etag, IfNoneMatch: etag == ""}
	_, err = s.Client.Put(ctx, s.URL.Bucket, key, b, cond)
	return err
}

// jsonObject is the body of a JSON object the sink writes.
func jsonObject(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// TakesState is Directory.TakesState for an S3 sink. Asked before a task
// runs, it does not wait for a store that is away (objstore.AwayWait):
// the task runs, and its publish waits, as before the question was asked.
func (s *S3) TakesState(ctx context.Context, stateID string) error {
	b, _, err := s.readBinding(objstore.WaitingForServer(ctx, 0))
	if err != nil {
		return err
	}
	return foreignState(s.Name, s.URL.String(), stateID, s.StatePath, b)
}

func (s *S3) readBinding(ctx context.Context) (*Binding, string, error) {
	var b Binding
	etag, ok, err := s.readJSONObject(ctx, s.bindingKey(), &b)
	if err != nil || !ok {
		return nil, "", err
	}
	if b.State == "" {
		return nil, "", fmt.Errorf("sink %s: %s has no state id", s.Name, s.URL.Of(s.bindingKey()))
	}
	return &b, etag, nil
}

// bind refuses a state the sink is not bound to, and binds an unbound sink
// to stateID (create-only: of two states publishing first at once, one
// binds and the other is refused).
func (s *S3) bind(ctx context.Context, stateID string, v store.Version) error {
	for range 3 {
		b, etag, err := s.readBinding(ctx)
		if err != nil {
			return err
		}
		records := func() ([]Record, error) {
			_, recs, err := s.FenceRecords(ctx)
			return recs, err
		}
		write, err := judgeBinding(s.Name, s.URL.String(), stateID, s.StatePath, b, records, v)
		if err != nil || write == nil {
			return err
		}
		// Create-only when unbound, compare-and-swap otherwise.
		err = s.writeJSONObject(ctx, s.bindingKey(), etag, *write)
		if !errors.Is(err, objstore.ErrPrecondition) {
			return err
		}
	}
	return fmt.Errorf("sink %s: its binding keeps changing", s.Name)
}

// Record returns the fence record (the pointer) of one interval, nil when
// it has none.
func (s *S3) Record(ctx context.Context, interval string) (*Record, error) {
	r, _, err := s.readRecord(ctx, interval)
	return r, err
}

// readRecord returns the interval's pointer (its record) and its ETag.
func (s *S3) readRecord(ctx context.Context, interval string) (*Record, string, error) {
	var r Record
	etag, ok, err := s.readJSONObject(ctx, s.pointerKey(interval), &r)
	if err != nil || !ok {
		return nil, "", err
	}
	return &r, etag, nil
}

// Publish makes an accepted version visible at PREFIX/<interval>:
//
//  1. probe the server's conditional writes (once), and refuse a state the
//     sink is not bound to (binding an unbound sink, create-only), before
//     anything is uploaded;
//  2. read the pointer; unless it already holds a newer token, upload the
//     version's files under .versions/<name>/, checking their digest, and
//     its _pipec.json last;
//  3. judge the token against the pointer (fence.Decide) and
//     compare-and-swap the store's pointer (which also fences at grant);
//  4. if both accepted, swap the pointer object with If-Match on the ETag
//     judged; if it moved meanwhile, read and judge again.
//
// A crash between 3 and 4 leaves the old version visible and the store
// ahead: publishing again, or ReconcileAll, completes it.
func (s *S3) Publish(ctx context.Context, v store.Version) (Result, error) {
	if err := checkNames(v.Artifact, v.Interval); err != nil {
		return Result{}, err
	}
	if v.State != store.VersionAccepted {
		return Result{}, fmt.Errorf("publish %s to %s: version is %s, only an accepted version is published", v.Label(), s.Name, v.State)
	}
	fenced := s.Fencing != FencingNone
	name := VersionName(v)
	res := Result{Unfenced: !fenced, Version: v, Visible: s.URL.Of(s.pointerKey(v.Interval)),
		VersionDir: s.URL.Of(s.versionKey(name))}
	if err := s.probe(ctx); err != nil {
		return Result{}, fmt.Errorf("publish %s: %w", v.Label(), err)
	}
	stateID, err := s.Store.StateID(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("publish %s to %s: %w", v.Label(), s.Name, err)
	}
	if err := s.bind(ctx, stateID, v); err != nil {
		return Result{}, fmt.Errorf("publish %s: %w", v.Label(), err)
	}
	rec, etag, err := s.readRecord(ctx, v.Interval)
	if err != nil {
		return Result{}, fmt.Errorf("publish %s to %s: %w", v.Label(), s.Name, err)
	}
	if rec != nil && (rec.Pipeline != v.Pipeline || rec.Artifact != v.Artifact) {
		return Result{}, &OtherArtifactError{Sink: s.Name, Path: s.URL.String(), Held: *rec, Pipeline: v.Pipeline, Artifact: v.Artifact}
	}
	// A stale attempt need not upload only to be fenced: the pointer's
	// token never goes down.
	if fence.Decide(rec.held(), v.Token, name, fenced) != fence.Fenced {
		if err := s.upload(ctx, v); err != nil {
			return Result{}, fmt.Errorf("publish %s to %s: %w", v.Label(), s.Name, err)
		}
	}
	storeDone := false
	for round := 0; ; round++ {
		// The pointer read before the upload is judged first: if it moved
		// meanwhile, the swap's If-Match is refused and it is read again.
		if round > 0 {
			if rec, etag, err = s.readRecord(ctx, v.Interval); err != nil {
				return res, fmt.Errorf("publish %s to %s: %w", v.Label(), s.Name, err)
			}
		}
		decision := fence.Decide(rec.held(), v.Token, name, fenced)
		if decision == fence.Fenced {
			return res, fencedBySink(ctx, s.Store, s.Name, v, rec, &res)
		}
		if !storeDone {
			won, err := swapInStore(ctx, s.Store, s.Name, v, nil, &res)
			if err != nil {
				return Result{}, err
			}
			if !won {
				return res, nil
			}
			storeDone = true
		}
		if decision == fence.Idempotent {
			return res, nil
		}
		if beforeSwap != nil {
			beforeSwap()
		}
		// The binding again, right before the swap: an adoption that
		// completed while this publish uploaded refuses it here (one round
		// trip; what remains is the moment between this read and the swap,
		// where the directory sink holds its lock).
		if b, _, err := s.readBinding(ctx); err != nil {
			return res, fmt.Errorf("publish %s to %s: pointer swapped in the store, sink not yet: %w", v.Label(), s.Name, err)
		} else if b == nil || b.State != stateID {
			bound := Binding{}
			if b != nil {
				bound = *b
			}
			return res, fmt.Errorf("publish %s: pointer swapped in the store, sink not: %w", v.Label(),
				&ForeignStateError{Sink: s.Name, Path: s.URL.String(), Bound: bound, State: stateID, StatePath: s.StatePath})
		}
		next := Record{Pipeline: v.Pipeline, Artifact: v.Artifact, Interval: v.Interval, Token: v.Token, Version: name,
			Digest: v.Digest, State: stateID, Run: v.Run, Attempt: v.Attempt, URL: res.VersionDir}
		err = s.writeJSONObject(ctx, s.pointerKey(v.Interval), etag, next)
		if err == nil {
			return res, nil
		}
		if !errors.Is(err, objstore.ErrPrecondition) || round > 100 {
			return res, fmt.Errorf("publish %s to %s: pointer swapped in the store, sink not yet: %w", v.Label(), s.Name, err)
		}
		// Another writer swapped first: judge again against what it wrote.
	}
}

// upload puts the version's files under .versions/<name>/ unless its
// manifest, written last, is there already (the same name is the same
// bytes and the same attempt).
func (s *S3) upload(ctx context.Context, v store.Version) error {
	prefix := s.versionKey(VersionName(v))
	if ok, err := s.Client.Exists(ctx, s.URL.Bucket, prefix+ManifestName); err != nil || ok {
		return err
	}
	if v.Location == "" {
		return fmt.Errorf("version has no location")
	}
	src := v.Location
	if s.Files != nil {
		var err error
		if src, err = s.Files(ctx, v); err != nil {
			return err
		}
	}
	if err := refuseReserved(src); err != nil {
		return err
	}
	entries, err := listTree(src)
	if err != nil {
		return err
	}
	if digest, err := Digest(src); err != nil {
		return err
	} else if digest != v.Digest {
		return fmt.Errorf("the version's files changed after the audit: digest %s, audited %s", digest, v.Digest)
	}
	var files []string
	for _, e := range entries {
		if !e.dir {
			files = append(files, e.rel)
		}
	}
	if err := objstore.Each(ctx, files, func(ctx context.Context, rel string) error {
		return s.Client.PutFile(ctx, s.URL.Bucket, prefix+rel, filepath.Join(src, filepath.FromSlash(rel)))
	}); err != nil {
		return err
	}
	m, err := json.MarshalIndent(manifestOf(v, s.Lineage), "", "  ")
	if err != nil {
		return err
	}
	_, err = s.Client.Put(ctx, s.URL.Bucket, prefix+ManifestName, append(m, '\n'), objstore.Cond{})
	return err
}

// ReconcileAll completes publishes of this state that won in the store but
// stopped before the sink's pointer swap (the store's pointer holds a higher
// token than the sink's), and returns how many pointers it swapped. The
// pointer never goes to an older version or one of another state.
func (s *S3) ReconcileAll(ctx context.Context) (int, error) {
	if s.Pipeline == "" {
		return 0, nil
	}
	ps, err := s.Store.Pointers(ctx, s.Pipeline, s.Name)
	if err != nil || len(ps) == 0 {
		return 0, err
	}
	b, _, err := s.readBinding(ctx)
	if err != nil {
		return 0, err
	}
	stateID, err := s.Store.StateID(ctx)
	if err != nil {
		return 0, err
	}
	if b == nil || b.State != stateID {
		return 0, nil // not this state's sink: its pointers say nothing here
	}
	listed, err := s.pointerETags(ctx)
	if err != nil {
		return 0, err
	}
	// The pointers' versions in one read, not one each: a backfill's run
	// reads them for every interval the sink holds.
	versions, err := s.Store.PointedVersions(ctx, s.Pipeline, s.Name)
	if err != nil {
		return 0, err
	}
	// One GET per interval whose pointer object is not listed as the
	// record the state's pointer makes: 16 at a time, so a run's start
	// after a crash does not wait on thousands of them in a row.
	var (
		mu      sync.Mutex
		changed int
		errs    []error
		wg      sync.WaitGroup
	)
	sem := make(chan struct{}, 16)
	for _, p := range ps {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ok, err := s.catchUp(ctx, p, versions[p.Version], stateID, listed[s.pointerKey(p.Interval)])
			mu.Lock()
			defer mu.Unlock()
			if ok {
				changed++
			}
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return changed, errors.Join(errs...)
}

// pointerETags lists the sink's pointer objects (the keys beside its
// folders) with their ETags, in one listing for a thousand intervals.
func (s *S3) pointerETags(ctx context.Context) (map[string]string, error) {
	objs, _, err := s.Client.List(ctx, s.URL.Bucket, s.URL.Key(""), "/")
	if err != nil {
		return nil, err
	}
	etags := make(map[string]string, len(objs))
	for _, o := range objs {
		etags[o.Key] = o.ETag
	}
	return etags, nil
}

// catchUp swaps the sink's pointer object for p's interval to p's version
// when the state is ahead of it. v is that version as read with the
// pointers (read here when it was not: ID 0, a pointer swapped since).
// listed is the object's ETag as listed ("" if it was not): a plain PUT's
// ETag is the MD5 of its body on S3 and on the servers pipec is tested
// with, so an object listed with the MD5 of the record p makes is that
// record, and is not read again. Any other ETag, a server whose ETags are
// not MD5s included, is read and judged.
func (s *S3) catchUp(ctx context.Context, p store.Pointer, v store.Version, stateID, listed string) (bool, error) {
	if v.ID != p.Version {
		var err error
		if v, err = s.Store.GetVersion(ctx, p.Version); err != nil {
			return false, err
		}
	}
	name := VersionName(v)
	want := Record{Pipeline: v.Pipeline, Artifact: v.Artifact, Interval: v.Interval, Token: v.Token, Version: name,
		Digest: v.Digest, State: stateID, Run: v.Run, Attempt: v.Attempt, URL: s.URL.Of(s.versionKey(name))}
	if listed != "" {
		body, err := jsonObject(want)
		if err != nil {
			return false, err
		}
		if sum := md5.Sum(body); strings.Trim(listed, `"`) == hex.EncodeToString(sum[:]) {
			return false, nil
		}
	}
	for range 10 {
		rec, etag, err := s.readRecord(ctx, p.Interval)
		if err != nil {
			return false, err
		}
		if rec != nil && (rec.Pipeline != s.Pipeline || rec.Artifact != p.Artifact) {
			return false, nil
		}
		if fence.Decide(rec.held(), v.Token, name, s.Fencing != FencingNone) != fence.Accept {
			return false, nil
		}
		if ok, err := s.Client.Exists(ctx, s.URL.Bucket, s.versionKey(name)+ManifestName); err != nil {
			return false, err
		} else if !ok {
			return false, fmt.Errorf("published version %s is missing from %s", v.Label(), s.URL)
		}
		err = s.writeJSONObject(ctx, s.pointerKey(p.Interval), etag, want)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, objstore.ErrPrecondition) {
			return false, err
		}
	}
	return false, fmt.Errorf("sink %s: the pointer of %s keeps changing", s.Name, p.Interval)
}

// VisibleVersion implements Managed: the pointer, read once.
func (s *S3) VisibleVersion(ctx context.Context, interval string) (Visible, error) {
	vis := Visible{Pointer: s.URL.Of(s.pointerKey(interval))}
	if err := checkElem("interval", interval); err != nil {
		return vis, err
	}
	rec, _, err := s.readRecord(ctx, interval)
	if err != nil {
		return vis, err
	}
	if rec == nil {
		return vis, fmt.Errorf("%s: %w", vis.Pointer, fs.ErrNotExist)
	}
	vis.Name, vis.Location = rec.Version, s.URL.Of(s.versionKey(rec.Version))
	b, _, err := s.Client.Get(ctx, s.URL.Bucket, s.versionKey(rec.Version)+ManifestName)
	if err != nil {
		return vis, fmt.Errorf("no lineage manifest: %w", err)
	}
	if err := json.Unmarshal(b, &vis.Manifest); err != nil || vis.Manifest.Schema != ManifestSchema {
		return vis, fmt.Errorf("no lineage manifest: %s is not pipec's (%v)", vis.Location+ManifestName, err)
	}
	return vis, nil
}

// Intervals implements Managed: the pointer objects right under the prefix.
func (s *S3) Intervals(ctx context.Context) ([]string, error) {
	objs, _, err := s.Client.List(ctx, s.URL.Bucket, s.URL.Key(""), "/")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range objs {
		name := o.Key[strings.LastIndex(o.Key, "/")+1:]
		if name != "" && !strings.HasPrefix(name, ".") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// FenceRecords implements Managed: the binding and the pointers.
func (s *S3) FenceRecords(ctx context.Context) (*Binding, []Record, error) {
	b, _, err := s.readBinding(ctx)
	if err != nil {
		return nil, nil, err
	}
	ivs, err := s.Intervals(ctx)
	if err != nil {
		return nil, nil, err
	}
	var recs []Record
	for _, iv := range ivs {
		r, _, err := s.readRecord(ctx, iv)
		if err != nil {
			return nil, nil, err
		}
		if r != nil {
			recs = append(recs, *r)
		}
	}
	return b, recs, nil
}

// Adopt implements Managed, as Directory.Adopt does: the state's tokens
// are raised above every token the sink's pointers hold, durably, before the
// binding moves (If-Match on the binding read: an adoption racing another
// is refused, and adopting again is safe).
func (s *S3) Adopt(ctx context.Context, reason string, now time.Time) (AdoptResult, error) {
	stateID, err := s.Store.StateID(ctx)
	if err != nil {
		return AdoptResult{}, err
	}
	prev, etag, err := s.readBinding(ctx)
	if err != nil {
		return AdoptResult{}, err
	}
	_, recs, err := s.FenceRecords(ctx)
	if err != nil {
		return AdoptResult{}, err
	}
	res, b, err := adopt(ctx, s.Store, stateID, fmt.Sprintf("sink %s (%s)", s.Name, s.URL), s.StatePath, reason, now, prev, recs)
	if err != nil || b == nil {
		return res, err
	}
	if err := s.writeJSONObject(ctx, s.bindingKey(), etag, *b); err != nil {
		if errors.Is(err, objstore.ErrPrecondition) {
			return AdoptResult{}, fmt.Errorf("sink %s: its binding changed while adopting; adopt again", s.Name)
		}
		return AdoptResult{}, err
	}
	return res, nil
}

// HeldVersions implements Managed: every name with an object under the
// versions prefix (one listing, by common prefix).
func (s *S3) HeldVersions(ctx context.Context) (map[string]bool, error) {
	root := s.URL.Key(VersionsDir) + "/"
	_, dirs, err := s.Client.List(ctx, s.URL.Bucket, root, "/")
	if err != nil {
		return nil, err
	}
	held := make(map[string]bool, len(dirs))
	for _, d := range dirs {
		held[strings.TrimSuffix(strings.TrimPrefix(d, root), "/")] = true
	}
	return held, nil
}

// PruneVersions implements Managed, as Directory.Prune does, with one more
// rule since no lock holds publishers off: a version whose token is above
// the visible one's is never removed (its publish may be about to swap the
// pointer to it). A version's manifest is removed first, so a half-removed
// version is an unfinished one, never a complete one.
func (s *S3) PruneVersions(ctx context.Context, opts PruneOptions) ([]Pruned, error) {
	if opts.Keep < 1 {
		return nil, fmt.Errorf("prune %s: keep must be at least 1", s.Name)
	}
	root := s.URL.Key(VersionsDir) + "/"
	objs, _, err := s.Client.List(ctx, s.URL.Bucket, root, "")
	if err != nil {
		return nil, err
	}
	type version struct {
		name     string
		token    int64
		complete bool
		keys     []string
		bytes    int64
		modified time.Time
	}
	byName := map[string]*version{}
	for _, o := range objs {
		name, rest, ok := strings.Cut(strings.TrimPrefix(o.Key, root), "/")
		if !ok {
			continue
		}
		v := byName[name]
		if v == nil {
			v = &version{name: name}
			if i := strings.LastIndex(name, ".t"); i >= 0 {
				v.token, _ = strconv.ParseInt(name[i+2:], 10, 64)
			}
			byName[name] = v
		}
		v.keys = append(v.keys, o.Key)
		v.bytes += o.Size
		v.complete = v.complete || rest == ManifestName
		v.modified = later(v.modified, o.Modified)
	}
	var out []Pruned
	remove := func(v *version, why string) error {
		if !opts.DryRun {
			// The manifest first: a version without it is never named again.
			slices.SortStableFunc(v.keys, func(a, b string) int {
				return boolInt(!strings.HasSuffix(a, "/"+ManifestName)) - boolInt(!strings.HasSuffix(b, "/"+ManifestName))
			})
			for _, k := range v.keys {
				if err := s.Client.Delete(ctx, s.URL.Bucket, k); err != nil {
					return err
				}
			}
		}
		out = append(out, Pruned{Path: s.URL.Of(root + v.name + "/"), Why: why, Bytes: v.bytes})
		return nil
	}
	byInterval := map[string][]*version{}
	for _, name := range slices.Sorted(mapKeys(byName)) {
		v := byName[name]
		artifactInterval, _, ok := strings.Cut(name, "#")
		_, interval, ok2 := strings.Cut(artifactInterval, "@")
		if !ok || !ok2 {
			continue
		}
		byInterval[interval] = append(byInterval[interval], v)
	}
	for _, interval := range slices.Sorted(mapKeys(byInterval)) {
		rec, _, err := s.readRecord(ctx, interval)
		if err != nil {
			return out, err
		}
		visible, visibleToken := "", int64(-1)
		if rec != nil {
			visible, visibleToken = rec.Version, rec.Token
		}
		vs := byInterval[interval]
		slices.SortFunc(vs, func(a, b *version) int {
			if a.token != b.token {
				return cmpInt64(b.token, a.token)
			}
			return strings.Compare(a.name, b.name)
		})
		kept := 0
		for _, v := range vs {
			switch {
			case v.name == visible || rec == nil || v.token > visibleToken:
				// Visible, or maybe about to be.
			case !v.complete:
				if opts.Now.Sub(v.modified) >= opts.TmpAge {
					if err := remove(v, "unfinished upload left by a crash"); err != nil {
						return out, err
					}
				}
				continue
			case kept < opts.Keep:
			default:
				if err := remove(v, fmt.Sprintf("superseded version of %s (token %d; the newest %d are kept)", interval, v.token, opts.Keep)); err != nil {
					return out, err
				}
				continue
			}
			if v.complete {
				kept++
			}
		}
	}
	return out, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Download reads the version visible at interval into dir as a reader
// should: the pointer once, then every file (and _pipec.json) from the
// prefix it names, never through the pointer again. It returns the pointer
// read.
func (s *S3) Download(ctx context.Context, interval, dir string) (Record, error) {
	rec, _, err := s.readRecord(ctx, interval)
	if err != nil {
		return Record{}, err
	}
	if rec == nil {
		return Record{}, fmt.Errorf("%s: %w", s.URL.Of(s.pointerKey(interval)), fs.ErrNotExist)
	}
	prefix := s.versionKey(rec.Version)
	objs, _, err := s.Client.List(ctx, s.URL.Bucket, prefix, "")
	if err != nil {
		return *rec, err
	}
	for _, o := range objs {
		p := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(o.Key, prefix)))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return *rec, err
		}
		var buf bytes.Buffer
		if _, err := s.Client.GetTo(ctx, s.URL.Bucket, o.Key, &buf); err != nil {
			return *rec, err
		}
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			return *rec, err
		}
	}
	return *rec, nil
}
