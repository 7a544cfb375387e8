package artifacts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pipec/pipec/internal/atomicfile"
	"github.com/pipec/pipec/runtime/objstore"
	"github.com/pipec/pipec/runtime/sink"
)

// S3 is a Store in an S3 bucket (or an S3-compatible server), for workers
// that share no folder:
//
//	PREFIX/<pipeline>/<artifact>/<hex digest>/<file>...      the version's files
//	PREFIX/.committed/<pipeline>/<artifact>/<hex digest>     its marker, written last
//
// Put uploads every file of the frozen version, then writes the marker with
// If-None-Match: * (create only): the marker is the commit. It lists the
// version's entries (files with their sizes, folders), so Get needs no
// listing, and a version without it (a put that crashed, or was cut off by
// the server going away) is a leftover that Get and List do not see. Two
// workers putting one key upload the same bytes; whichever marker lands
// first is the commit, and the other's precondition failure is a success.
//
// Get downloads the version into the worker's cache (Cache/<key>, under its
// --workdir), through a temporary folder renamed into place once its digest
// is checked, unless it is there already. Put leaves the uploaded folder in
// the cache too, so the worker that made a version does not download it.
type S3 struct {
	URL objstore.URL
	// Cache is the folder on this machine versions are downloaded into.
	Cache  string
	Client *objstore.Client
}

var _ Store = (*S3)(nil)

// committedDir is the marker namespace under the prefix.
const committedDir = ".committed"

// marker is a committed version's marker object.
type marker struct {
	Schema  string        `json:"schema"`
	Digest  string        `json:"digest"`
	Entries []markerEntry `json:"entries"`
}

type markerEntry struct {
	Path string `json:"path"`
	Dir  bool   `json:"dir,omitempty"`
	Size int64  `json:"size,omitempty"`
	Exec bool   `json:"exec,omitempty"`
}

const markerSchema = "pipec/artifact/v1"

// NewS3 is the store at an s3:// URL, caching downloads in cache, its
// client from cs.
func NewS3(ctx context.Context, location, cache string, cs *objstore.Clients) (*S3, error) {
	u, err := objstore.ParseURL(location)
	if err != nil {
		return nil, fmt.Errorf("artifact store: %w", err)
	}
	c, err := cs.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("artifact store %s: %w", location, err)
	}
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		cache = filepath.Join(dir, "pipec", "artifacts")
	}
	return &S3{URL: u, Cache: cache, Client: c}, nil
}

func (s *S3) objects(k Key) string { return s.URL.Key(k.Pipeline, k.Artifact, k.hex()) + "/" }
func (s *S3) marker(k Key) string  { return s.URL.Key(committedDir, k.Pipeline, k.Artifact, k.hex()) }

// cached is where k is kept on this machine.
func (s *S3) cached(k Key) string { return filepath.Join(s.Cache, k.Pipeline, k.Artifact, k.hex()) }

// Put implements Store.
func (s *S3) Put(ctx context.Context, k Key, dir string) error {
	if err := k.check(); err != nil {
		return err
	}
	ok, err := s.Client.Exists(ctx, s.URL.Bucket, s.marker(k))
	if err != nil {
		return fmt.Errorf("artifact store %s: put %s: %w", s.URL, k, err)
	}
	if !ok {
		if err := s.upload(ctx, k, dir); err != nil {
			return fmt.Errorf("artifact store %s: put %s: %w", s.URL, k, err)
		}
	}
	// The frozen folder is this version's bytes: keep it as the cached copy.
	final := s.cached(k)
	if _, err := os.Stat(final); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(final), 0o755); err == nil {
			_ = os.Rename(dir, final)
		}
	}
	return nil
}

func (s *S3) upload(ctx context.Context, k Key, dir string) error {
	digest, err := sink.Digest(dir)
	if err != nil {
		return err
	}
	if digest != k.Digest {
		return fmt.Errorf("%s has digest %s now, not the key's (changed after it was frozen)", dir, digest)
	}
	m := marker{Schema: markerSchema, Digest: k.Digest, Entries: []markerEntry{}}
	var files []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			m.Entries = append(m.Entries, markerEntry{Path: rel, Dir: true})
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		m.Entries = append(m.Entries, markerEntry{Path: rel, Size: info.Size(), Exec: info.Mode()&0o111 != 0})
		files = append(files, rel)
		return nil
	})
	if err != nil {
		return err
	}
	prefix := s.objects(k)
	if err := objstore.Each(ctx, files, func(ctx context.Context, rel string) error {
		return s.Client.PutFile(ctx, s.URL.Bucket, prefix+rel, filepath.Join(dir, filepath.FromSlash(rel)))
	}); err != nil {
		return err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	for range 3 {
		_, err = s.Client.Put(ctx, s.URL.Bucket, s.marker(k), b, objstore.Cond{IfNoneMatch: true})
		if !errors.Is(err, objstore.ErrPrecondition) {
			return err
		}
		// Another writer of the same bytes committed first, or (409) was
		// committing at the same moment and may yet fail: look.
		if ok, err := s.Client.Exists(ctx, s.URL.Bucket, s.marker(k)); err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("its marker could not be written (concurrent writers kept conflicting)")
}

// Get implements Store.
func (s *S3) Get(ctx context.Context, k Key) (string, error) {
	if err := k.check(); err != nil {
		return "", err
	}
	final := s.cached(k)
	if fi, err := os.Stat(final); err == nil && fi.IsDir() {
		// Read now: pipec gc keeps a cached copy read within its
		// cache age (gc.DefaultCacheAge).
		now := time.Now()
		_ = os.Chtimes(final, now, now)
		return final, nil
	}
	b, _, err := s.Client.Get(ctx, s.URL.Bucket, s.marker(k))
	if errors.Is(err, objstore.ErrNotFound) {
		return "", fmt.Errorf("version %s: %w %s", k, ErrNotFound, s.URL)
	}
	if err != nil {
		return "", fmt.Errorf("artifact store %s: %w", s.URL, err)
	}
	var m marker
	if err := json.Unmarshal(b, &m); err != nil || m.Schema != markerSchema || m.Digest != k.Digest {
		return "", fmt.Errorf("artifact store %s: the marker of %s is damaged or not pipec's", s.URL, k)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(final), ".tmp-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := s.download(ctx, k, m, tmp); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("artifact store %s: get %s: %w", s.URL, k, err)
	}
	digest, err := sink.Digest(tmp)
	if err == nil && digest != k.Digest {
		err = fmt.Errorf("the downloaded files have digest %s, not the key's: the objects were changed in the bucket", digest)
	}
	if err == nil {
		err = atomicfile.SyncDir(tmp)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("artifact store %s: get %s: %w", s.URL, k, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.RemoveAll(tmp)
		if fi, serr := os.Stat(final); serr == nil && fi.IsDir() {
			return final, nil // another download of the same version won
		}
		return "", err
	}
	_ = atomicfile.SyncDir(filepath.Dir(final))
	return final, nil
}

func (s *S3) download(ctx context.Context, k Key, m marker, dst string) error {
	var files []string
	byPath := map[string]markerEntry{}
	for _, e := range m.Entries {
		if !fs.ValidPath(e.Path) || e.Path == "." {
			return fmt.Errorf("the marker names %q, not a path inside the version", e.Path)
		}
		if e.Dir {
			if err := os.MkdirAll(filepath.Join(dst, filepath.FromSlash(e.Path)), 0o755); err != nil {
				return err
			}
			continue
		}
		files = append(files, e.Path)
		byPath[e.Path] = e
	}
	prefix := s.objects(k)
	return objstore.Each(ctx, files, func(ctx context.Context, rel string) error {
		e := byPath[rel]
		p := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o444)
		if e.Exec {
			mode |= 0o111
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return err
		}
		n, err := s.Client.GetTo(ctx, s.URL.Bucket, prefix+rel, f)
		if err == nil && n != e.Size {
			err = fmt.Errorf("%s: %d bytes, the marker says %d", rel, n, e.Size)
		}
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// Has implements Store: its marker is there.
func (s *S3) Has(ctx context.Context, k Key) (bool, error) {
	if err := k.check(); err != nil {
		return false, err
	}
	ok, err := s.Client.Exists(ctx, s.URL.Bucket, s.marker(k))
	if err != nil {
		return false, fmt.Errorf("artifact store %s: %w", s.URL, err)
	}
	return ok, nil
}

// Drop implements Store: this machine's cached copy goes, and the next Get
// downloads the objects again, their digest checked.
func (s *S3) Drop(_ context.Context, k Key) error {
	if err := k.check(); err != nil {
		return err
	}
	if err := removeVersionFolder(s.cached(k)); err != nil {
		return fmt.Errorf("artifact store %s: drop the cached copy of %s: %w", s.URL, k, err)
	}
	return nil
}

// Remove implements Store: the marker first (the version is gone for every
// reader), then its objects.
func (s *S3) Remove(ctx context.Context, k Key) error {
	if err := k.check(); err != nil {
		return err
	}
	if err := s.Client.Delete(ctx, s.URL.Bucket, s.marker(k)); err != nil {
		return fmt.Errorf("artifact store %s: remove %s: %w", s.URL, k, err)
	}
	objs, _, err := s.Client.List(ctx, s.URL.Bucket, s.objects(k), "")
	if err != nil {
		return fmt.Errorf("artifact store %s: remove %s: %w", s.URL, k, err)
	}
	for _, o := range objs {
		if err := s.Client.Delete(ctx, s.URL.Bucket, o.Key); err != nil {
			return fmt.Errorf("artifact store %s: remove %s: %w", s.URL, k, err)
		}
	}
	return nil
}

// List implements Store: the committed markers.
func (s *S3) List(ctx context.Context) ([]Key, error) {
	root := s.URL.Key(committedDir) + "/"
	objs, _, err := s.Client.List(ctx, s.URL.Bucket, root, "")
	if err != nil {
		return nil, fmt.Errorf("artifact store %s: %w", s.URL, err)
	}
	var out []Key
	for _, o := range objs {
		parts := strings.Split(strings.TrimPrefix(o.Key, root), "/")
		if len(parts) != 3 {
			continue
		}
		if k, err := NewKey(parts[0], parts[1], "sha256:"+parts[2]); err == nil {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b Key) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}

// Uncommitted is a version prefix that holds objects but no marker.
type Uncommitted struct {
	Key Key
	// Modified is its newest object's time; Bytes their sizes.
	Modified time.Time
	Bytes    int64
}

// Uncommitted lists the version prefixes that hold objects but no marker:
// puts in progress, or cut off (pipec gc removes those older than any put
// could still be running, with Remove).
func (s *S3) Uncommitted(ctx context.Context) ([]Uncommitted, error) {
	committed, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	root := s.URL.Key("")
	objs, _, err := s.Client.List(ctx, s.URL.Bucket, root, "")
	if err != nil {
		return nil, err
	}
	at := map[Key]int{}
	var out []Uncommitted
	for _, o := range objs {
		parts := strings.SplitN(strings.TrimPrefix(o.Key, root), "/", 4)
		if len(parts) < 4 || strings.HasPrefix(parts[0], ".") {
			continue
		}
		k, err := NewKey(parts[0], parts[1], "sha256:"+parts[2])
		if err != nil || slices.Contains(committed, k) {
			continue
		}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, Uncommitted{Key: k})
		}
		out[i].Bytes += o.Size
		if o.Modified.After(out[i].Modified) {
			out[i].Modified = o.Modified
		}
	}
	return out, nil
}

func (s *S3) owner(pipeline string) string { return s.URL.Key(ownersDir, pipeline) }

// ReadOwner implements Store.
func (s *S3) ReadOwner(ctx context.Context, pipeline string) ([]byte, string, error) {
	data, _, err := s.Client.Get(ctx, s.URL.Bucket, s.owner(pipeline))
	if errors.Is(err, objstore.ErrNotFound) {
		err = ErrNotFound
	}
	return data, s.URL.Of(s.owner(pipeline)), err
}

// WriteOwner implements Store: create-only is If-None-Match: *, so of two
// states racing one wins.
func (s *S3) WriteOwner(ctx context.Context, pipeline string, data []byte, replace bool) (bool, error) {
	_, err := s.Client.Put(ctx, s.URL.Bucket, s.owner(pipeline), data, objstore.Cond{IfNoneMatch: !replace})
	if errors.Is(err, objstore.ErrPrecondition) {
		return false, nil
	}
	return err == nil, err
}

func (s *S3) String() string { return s.URL.String() }
