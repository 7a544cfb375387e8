package sink

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pipec/pipec/internal/atomicfile"
)

// Pruned is one folder Prune removed (or would remove, dry).
type Pruned struct {
	Path string
	Why  string
	// Bytes is its size when the sink knows it without a walk (an object
	// store lists sizes); 0 for a folder (measure it).
	Bytes int64
}

// PruneOptions say what Prune keeps.
type PruneOptions struct {
	// Keep is how many versions of each interval stay, newest (highest
	// token) first; the visible one always stays, whether it is among them
	// or not. At least 1.
	Keep int
	// TmpAge is how old an unfinished copy (.versions/.tmp-*) must be to be
	// called a crash leftover; a younger one may be a publish in progress.
	TmpAge time.Duration
	Now    time.Time
	DryRun bool
}

// Prune removes superseded versions of a directory sink: for each interval,
// every version folder beyond the newest opts.Keep by token, never the one
// the interval's link names; and unfinished copies older than opts.TmpAge.
// It holds the sink's lock, so no link swap happens while it decides; a
// publish copying a new version meanwhile makes the newest one, which stays.
//
// A reader that resolved a link before a version was superseded and still
// reads that folder loses it when the folder is pruned: keep enough versions
// for the readers' longest read.
func (d *Directory) Prune(opts PruneOptions) ([]Pruned, error) {
	if opts.Keep < 1 {
		return nil, fmt.Errorf("prune %s: keep must be at least 1", d.Name)
	}
	versions := filepath.Join(d.Path, VersionsDir)
	entries, err := os.ReadDir(versions)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	unlock, err := lockFile(filepath.Join(d.Path, ".lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()

	type version struct {
		name  string
		token int64
	}
	byInterval := map[string][]version{}
	var out []Pruned
	remove := func(p Pruned) error {
		if !opts.DryRun {
			if err := os.RemoveAll(p.Path); err != nil {
				return err
			}
		}
		out = append(out, p)
		return nil
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() {
			continue
		}
		if strings.HasPrefix(name, ".tmp-") {
			info, err := e.Info()
			if err == nil && opts.Now.Sub(info.ModTime()) >= opts.TmpAge {
				if err := remove(Pruned{Path: filepath.Join(versions, name), Why: "unfinished copy left by a crash"}); err != nil {
					return out, err
				}
			}
			continue
		}
		artifactInterval, rest, ok := strings.Cut(name, "#")
		if !ok {
			continue // not a folder pipec made
		}
		_, interval, ok := strings.Cut(artifactInterval, "@")
		if !ok {
			continue
		}
		var token int64 // a folder named before tokens were in names: oldest
		if i := strings.LastIndex(rest, ".t"); i >= 0 {
			token, _ = strconv.ParseInt(rest[i+2:], 10, 64)
		}
		byInterval[interval] = append(byInterval[interval], version{name: name, token: token})
	}
	for _, interval := range slices.Sorted(mapKeys(byInterval)) {
		vs := byInterval[interval]
		slices.SortFunc(vs, func(a, b version) int {
			if a.token != b.token {
				return cmpInt64(b.token, a.token)
			}
			return strings.Compare(a.name, b.name)
		})
		visible := ""
		if target, err := os.Readlink(filepath.Join(d.Path, interval)); err == nil {
			visible = filepath.Base(target)
		}
		for i, v := range vs {
			if i < opts.Keep || v.name == visible {
				continue
			}
			if err := remove(Pruned{Path: filepath.Join(versions, v.name),
				Why: fmt.Sprintf("superseded version of %s (token %d; the newest %d are kept)", interval, v.token, opts.Keep)}); err != nil {
				return out, err
			}
		}
	}
	if len(out) > 0 && !opts.DryRun {
		if err := atomicfile.SyncDir(versions); err != nil {
			return out, err
		}
	}
	return out, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
