package gc

import (
	"io/fs"
	"strings"
	"time"

	"github.com/pipec/pipec/internal/fswalk"
	"github.com/pipec/pipec/runtime/artifacts"
)

// DefaultCacheAge is how long a cached copy of a version that is not the
// current accepted one stays after it was last read.
const DefaultCacheAge = 24 * time.Hour

// collectCache removes, from this machine's cache of an object store's
// versions (<scratch>/cache/<pipeline>/<artifact>/<hex digest>, where a
// worker's or a local run's downloads and own outputs are kept: see
// artifacts.S3), the copies of this state's pipelines that are not the
// current accepted version of their interval and were not read for
// CacheAge, and the downloads a crash left unfinished, older than TmpAge.
// A cached copy is only a copy: a reader of one removed downloads it again.
// Not the rule of the store itself (nothing while a run runs): a cache read
// by busy workers would never shrink. A task reading a superseded version
// for longer than CacheAge may lose it under it.
func (rep *Report) collectCache(root string, k *known, o Options) error {
	var gone []Item // removed after the walk, which must not lose its folders under it
	err := fswalk.AtDepth(root, 3, nil, func(p string, parts []string, d fs.DirEntry) {
		fi, err := d.Info()
		if err != nil || !fi.IsDir() {
			return
		}
		age := o.Now.Sub(fi.ModTime())
		if artifacts.IsTemp(parts[2]) {
			if age >= o.TmpAge {
				gone = append(gone, Item{Path: p, Why: "unfinished download into this machine's cache, left by a crash"})
			}
			return
		}
		key, err := artifacts.NewKey(parts[0], parts[1], "sha256:"+parts[2])
		if err == nil && k.pipelines[key.Pipeline] && !k.frozenKept[key.String()] && age >= o.CacheAge {
			gone = append(gone, Item{Path: p, Why: "cached copy of a version that is not the current accepted one, not read for " +
				strings.TrimSuffix(o.CacheAge.String(), "0m0s")})
		}
	})
	if err != nil {
		return err
	}
	for _, it := range gone {
		if err := rep.remove(it.Path, it.Why, o.DryRun); err != nil {
			return err
		}
	}
	return nil
}
