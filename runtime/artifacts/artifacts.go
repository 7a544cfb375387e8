// Package artifacts is a pipeline's shared artifact store: where accepted
// versions live so that a task on any worker reads its inputs, and a sink the
// version it publishes, from one place, never from the disk of the worker that
// produced them (seed 001: "a task cannot find its upstream local file").
//
// The runtime stages an attempt's outputs on the worker's own disk, freezes
// each one there (an immutable, content-addressed copy), audits the frozen
// copy, and puts an accepted one into the store before anything downstream
// may read it or it is published. A Folder on the worker's own filesystem
// is frozen into directly (Folder.OnFilesystemOf), and the put finds the
// version in place; either way only an accepted version is ever read. The
// state database records the version's Key (its location,
// "<pipeline>/<artifact>/<hex digest>"), not a path, and every reader turns
// it into a folder on its own machine with Get.
//
// The first implementation is a Folder: a directory, on a filesystem every
// worker mounts (NFS, CephFS, EFS), written durably. The second is S3 (an
// S3 bucket or S3-compatible server, s3.go), for workers that share no
// folder. The interface is small so that an object store implements it:
//
//   - Put uploads the folder's files under the key's prefix, then writes a
//     marker object last: the marker is the commit, so a version without it
//     is a crash leftover that Get and List do not see. The key names the
//     content (its digest), so two workers putting the same key write the
//     same bytes and either may win.
//   - Get downloads the version into the worker's cache
//     (<workdir>/cache/<key>, through a temporary folder renamed into place
//     once its digest is checked) unless it is there already, and returns
//     that folder: tasks read their inputs from local files as they do here.
//   - Remove deletes the marker first, then the objects; List lists markers.
package artifacts

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/pipec/pipec/runtime/objstore"
)

// ErrNotFound is returned by Get when the store has no such version.
var ErrNotFound = errors.New("not in the artifact store")

// Store is a pipeline's shared artifact store.
type Store interface {
	// Put stores the frozen version in the local folder dir under k, durably,
	// before it returns. The version is immutable once there: putting a key
	// the store holds already changes nothing (the same key is the same
	// bytes), so concurrent puts of one key are safe. dir's content must have
	// k's digest; a store may move dir rather than copy it, so the caller
	// reads the version through Get afterwards, and removes dir if it is
	// still there.
	Put(ctx context.Context, k Key, dir string) error
	// Get returns a folder on this machine holding k's files, to be read,
	// never written. ErrNotFound when the store does not hold k.
	Get(ctx context.Context, k Key) (string, error)
	// Has reports whether the store holds k, without fetching it.
	Has(ctx context.Context, k Key) (bool, error)
	// Remove deletes k (pipec gc); a key the store does not hold is no error.
	Remove(ctx context.Context, k Key) error
	// Drop removes the copy of k that Get gives on this machine, found
	// changed (a task wrote into its input folder): the store's own for a
	// folder store, this machine's cached one for an object store, whose
	// objects are left as they are. Nobody reads the changed bytes as k
	// then; a copy not there is no error.
	Drop(ctx context.Context, k Key) error
	// List returns every key the store holds, sorted, leaving out what is
	// not a complete version (crash leftovers, foreign files).
	List(ctx context.Context) ([]Key, error)
	// ReadOwner returns the record of the state that owns pipeline's
	// versions in the store (an Owner, as JSON; see OwnerOf) and where the
	// store keeps it; ErrNotFound when none is recorded.
	ReadOwner(ctx context.Context, pipeline string) (data []byte, where string, err error)
	// WriteOwner writes that record, durably: create-only unless replace,
	// a record already there then left as it is (created false).
	WriteOwner(ctx context.Context, pipeline string, data []byte, replace bool) (created bool, err error)
	// String names the store in messages.
	String() string
}

// Key names one version in a store: its pipeline, its artifact and the
// digest ("sha256:<hex>") of its content.
type Key struct {
	Pipeline string
	Artifact string
	Digest   string
}

// nameRE is what a pipeline or artifact name may be in a key: a spec name
// (the compiler checks them), which is one safe path element.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// hexRE is the hex part of a sha256 digest.
var hexRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// NewKey checks the parts of a key.
func NewKey(pipeline, artifact, digest string) (Key, error) {
	k := Key{Pipeline: pipeline, Artifact: artifact, Digest: digest}
	return k, k.check()
}

func (k Key) check() error {
	for _, n := range []string{k.Pipeline, k.Artifact} {
		if !nameRE.MatchString(n) || n == "." || n == ".." {
			return fmt.Errorf("artifact store key: %q is not a pipeline or artifact name", n)
		}
	}
	if !strings.HasPrefix(k.Digest, "sha256:") || !hexRE.MatchString(k.hex()) {
		return fmt.Errorf("artifact store key: digest %q is not sha256:<64 hex digits>", k.Digest)
	}
	return nil
}

func (k Key) hex() string { return strings.TrimPrefix(k.Digest, "sha256:") }

// String is the key as the state database records it (a version's
// Location): "<pipeline>/<artifact>/<hex digest>".
func (k Key) String() string { return k.Pipeline + "/" + k.Artifact + "/" + k.hex() }

// ParseKey reads a location the state recorded.
func ParseKey(location string) (Key, error) {
	parts := strings.Split(location, "/")
	if len(parts) != 3 {
		return Key{}, fmt.Errorf("artifact store location %q is not <pipeline>/<artifact>/<digest>", location)
	}
	return NewKey(parts[0], parts[1], "sha256:"+parts[2])
}

// Open opens the store at location: a folder (an absolute path) or an
// S3 bucket ("s3://bucket/prefix"), whose versions are downloaded into the
// user's cache folder. Other kinds are refused by name.
func Open(location string) (Store, error) { return OpenIn(location, "", nil) }

// OpenIn is Open with the folder an object store's versions are downloaded
// into (a worker's <workdir>/cache; "" for the user's cache folder) and the
// clients an object store's client comes from.
func OpenIn(location, cache string, cs *objstore.Clients) (Store, error) {
	if objstore.IsURL(location) {
		return NewS3(context.Background(), location, cache, cs)
	}
	if i := strings.Index(location, "://"); i > 0 {
		return nil, fmt.Errorf("artifact store %q: a folder or an s3:// URL is supported, not %s://", location, location[:i])
	}
	return NewFolder(location)
}

// Files returns the folder on this machine that holds the version recorded
// at location: through s, or, for an absolute path (a version a local run
// recorded before the artifact store existed), that path itself.
func Files(ctx context.Context, s Store, location string) (string, error) {
	if filepath.IsAbs(location) {
		return location, nil
	}
	k, err := ParseKey(location)
	if err != nil {
		return "", err
	}
	if s == nil {
		return "", fmt.Errorf("version %s is in the artifact store, and none is configured here "+
			"(set artifacts in the spec or give --artifacts)", location)
	}
	return s.Get(ctx, k)
}

// IsTemp reports whether a name in a store folder is work in progress (a put
// or a crash leftover of one), never a version.
func IsTemp(name string) bool { return strings.HasPrefix(name, ".") }
