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
	type found struct {
		path string
		key  artifacts.Key
		temp bool
		mod  time.Time
	}
	var all []found
	err := fswalk.AtDepth(root, 3, nil, func(p string, parts []string, d fs.DirEntry) {
		fi, err := d.Info()
		if err != nil || !fi.IsDir() {
			return
		}
		if artifacts.IsTemp(parts[2]) {
			all = append(all, found{path: p, temp: true, mod: fi.ModTime()})
			return
		}
		if key, err := artifacts.NewKey(parts[0], parts[1], "sha256:"+parts[2]); err == nil {
			all = append(all, found{path: p, key: key, mod: fi.ModTime()})
		}
	})
	if err != nil {
		return err
	}
	for _, f := range all {
		why := ""
		switch {
		case f.temp && o.Now.Sub(f.mod) >= o.TmpAge:
			why = "unfinished download into this machine's cache, left by a crash"
		case !f.temp && k.pipelines[f.key.Pipeline] && !k.frozenCurrent[f.key.String()] && o.Now.Sub(f.mod) >= o.CacheAge:
			why = "cached copy of a version that is not the current accepted one, not read for " + strings.TrimSuffix(o.CacheAge.String(), "0m0s")
		}
		if why == "" {
			continue
		}
		if err := rep.remove(f.path, why, o.DryRun); err != nil {
			return err
		}
	}
	return nil
}
