// Package gc removes what pipec leaves behind so that nothing grows without
// bound: the staging folders of finished attempts whose output no reader
// needs, heartbeat files of attempts that are over, crash leftovers (staging
// and logs of runs the state does not know), versions in the artifact store
// (runtime/artifacts: <pipeline>/<artifact>/<digest>, versions/ beside the
// state unless a shared store is configured) that are not the current
// accepted one of their interval nor may be audited by a later run
// (mayBeAudited; none while a run is running, and in a
// shared store only of the pipelines whose versions there this state owns,
// artifacts.Owner: a store shared with another state keeps that state's
// versions), copies into it that a crash left unfinished, this
// machine's cached copies of an object store's versions that are not
// current and were not read for a day (cache.go), and superseded versions
// in directory sinks. Of the empty folders left, only those that hold
// attempts or versions go: never a version's own, nor an attempt's.
//
// What it never removes: anything of a run still running; the staging of an
// attempt that is queued, running or unknown (an unknown attempt may still be
// alive); the staging of a succeeded attempt whose run was stopped before it
// audited its outputs, until a later attempt of the task succeeds (the next
// run audits them there, or from the artifact store); the staging of each
// artifact's current accepted version for its interval (downstream tasks
// of later runs and reruns read it), in staging and in the artifact store; while any run is running, the
// staging of any accepted version (an attempt started earlier may still
// read one since superseded); and in a sink, the visible version of an
// interval and the newest Keep versions.
//
// The disk is listed before the store is read: a staging folder is made
// after its attempt is recorded, so every folder found belongs to an attempt
// the store already knows when gc reads it, and a run that starts during gc
// cannot lose a folder gc did not see in the store.
package gc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pipec/pipec/internal/fswalk"
	"github.com/pipec/pipec/runtime/artifacts"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
)

// DefaultKeep is how many versions per interval a sink keeps by default.
const DefaultKeep = 2

// DefaultTmpAge is how old an unfinished sink copy must be to be removed.
const DefaultTmpAge = time.Hour

// Options say what to collect.
type Options struct {
	Store store.Store
	// StateDir is the folder of the state database: staging/, heartbeats/.
	StateDir string
	// StatePath names the state in the owner record of a shared artifact
	// store's versions (artifacts.Owner), when gc is the first to take them.
	StatePath string
	// Sinks are the sinks to prune (a spec's: directory and s3 sinks);
	// none: only the state folder is collected.
	Sinks []sink.Managed
	// Artifacts is the pipeline's shared artifact store, if one is
	// configured; the default one, versions/ beside the state, is always
	// collected (it holds the versions of runs without a shared store).
	Artifacts artifacts.Store
	// Keep and TmpAge: see sink.PruneOptions (DefaultKeep, DefaultTmpAge
	// when zero).
	Keep   int
	TmpAge time.Duration
	// CacheAge: see collectCache (DefaultCacheAge when zero).
	CacheAge time.Duration
	Now      time.Time
	DryRun   bool
}

// Item is one thing removed (or that would be, dry).
type Item struct {
	Path string `json:"path"`
	Why  string `json:"why"`
	// Bytes is the size of the files under Path.
	Bytes int64 `json:"bytes"`
}

// Report is what a collection did.
type Report struct {
	Removed []Item `json:"removed"`
	Bytes   int64  `json:"bytes"`
	DryRun  bool   `json:"dry_run"`
	// Running names the runs still running, sorted: while any runs, gc
	// keeps every version one of them may read, so a person seeing little
	// removed knows why.
	Running []string `json:"running,omitempty"`
	// Foreign are the pipelines whose versions in a shared artifact store
	// belong to another state (artifacts.Owner): left alone.
	Foreign []Foreign `json:"foreign,omitempty"`
}

// Foreign is a pipeline's versions in an artifact store that another state
// owns.
type Foreign struct {
	Store     string `json:"store"`
	Pipeline  string `json:"pipeline"`
	State     string `json:"state"`
	StatePath string `json:"state_path,omitempty"`
}

// Collect removes what no one needs any more and says what it removed.
func Collect(ctx context.Context, o Options) (_ *Report, err error) {
	if o.Store == nil || o.StateDir == "" {
		return nil, errors.New("gc: a store and its folder are required")
	}
	var h *hold
	if !o.DryRun {
		// Before the state is read (see hold.go).
		if h, err = takeHold(ctx, o.Store, holdLease, holdRenew, holdMargin); err != nil {
			return nil, err
		}
		defer func() {
			if rerr := h.release(ctx); rerr != nil && err == nil {
				err = rerr
			}
		}()
	}
	if o.Keep == 0 {
		o.Keep = DefaultKeep
	}
	if o.TmpAge == 0 {
		o.TmpAge = DefaultTmpAge
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.CacheAge == 0 {
		o.CacheAge = DefaultCacheAge
	}
	rep := &Report{Removed: []Item{}, DryRun: o.DryRun}
	// Another state's folder (a worker's --workdir given with the wrong
	// --state) holds attempts of runs this state does not know, or knows
	// under the same names: nothing in it is this gc's to remove.
	id, err := o.Store.StateID(ctx)
	if err == nil {
		claim := store.ClaimScratch
		if o.DryRun {
			claim = store.CheckScratch
		}
		err = claim(o.StateDir, id, o.StatePath)
	}
	if err != nil {
		return nil, err
	}
	// Disk first, then the store (see the package doc).
	staging, err := attemptDirs(filepath.Join(o.StateDir, "staging"))
	if err != nil {
		return nil, err
	}
	beats, err := attemptDirs(filepath.Join(o.StateDir, "heartbeats"))
	if err != nil {
		return nil, err
	}
	stores, err := artifactStores(o)
	if err != nil {
		return nil, err
	}
	held := make([][]artifacts.Key, len(stores))
	for i, s := range stores {
		if held[i], err = s.List(ctx); err != nil {
			return nil, fmt.Errorf("artifact store %s: %w", s, err)
		}
	}
	logs, err := attemptDirs(filepath.Join(o.StateDir, "logs"))
	if err != nil {
		return nil, err
	}
	k, err := readStore(ctx, o.Store)
	if err != nil {
		return nil, err
	}
	for id, r := range k.runs {
		if r.State == store.RunRunning {
			rep.Running = append(rep.Running, id)
		}
	}
	slices.Sort(rep.Running)
	for _, d := range staging {
		if why, ok := k.removableStaging(d); ok {
			if err := rep.remove(d.path, why, o.DryRun); err != nil {
				return rep, err
			}
		}
	}
	for _, d := range beats {
		if a, ok := k.attempts[d.ref]; ok && (a.State == store.AttemptQueued || a.State == store.AttemptRunning || a.State == store.AttemptUnknown) {
			continue
		}
		if err := rep.remove(d.path, "heartbeat file of an attempt that is over", o.DryRun); err != nil {
			return rep, err
		}
	}
	// Versions in the artifact stores: while a run is running any of them
	// may be read or about to be accepted; otherwise only the current
	// accepted ones are needed.
	if !k.anyActive {
		for i, s := range stores {
			// versions/ beside the state (the first) is the state's own.
			ours, err := rep.owned(ctx, s, i > 0, held[i], k.pipelines, artifacts.Owner{State: id, StatePath: o.StatePath},
				o.DryRun)
			if err != nil {
				return rep, err
			}
			for _, key := range held[i] {
				if k.frozenKept[key.String()] || !ours[key.Pipeline] {
					continue
				}
				if err := rep.removeKey(ctx, h, s, key, "frozen copy of a version that is not the current accepted one"); err != nil {
					return rep, err
				}
			}
		}
	}
	for _, s := range stores {
		if s3, ok := s.(*artifacts.S3); ok {
			unc, err := s3.Uncommitted(ctx)
			if err != nil {
				return rep, err
			}
			for _, u := range unc {
				if o.Now.Sub(u.Modified) < o.TmpAge {
					continue // maybe a put in progress
				}
				it := Item{Path: s3.String() + "/" + u.Key.String(), Why: "unfinished put into the artifact store (no marker), left by a crash", Bytes: u.Bytes}
				if !o.DryRun {
					if err := s3.Remove(ctx, u.Key); err != nil {
						return rep, err
					}
				}
				rep.Removed = append(rep.Removed, it)
				rep.Bytes += it.Bytes
			}
			continue
		}
		f, ok := s.(*artifacts.Folder)
		if !ok {
			continue
		}
		temps, err := f.Temps()
		if err != nil {
			return rep, err
		}
		for _, tmp := range temps {
			if o.Now.Sub(tmp.Modified) < o.TmpAge {
				continue // maybe a put in progress
			}
			if err := rep.remove(tmp.Path, "unfinished put into the artifact store, left by a crash", o.DryRun); err != nil {
				return rep, err
			}
		}
	}
	if err := rep.collectCache(filepath.Join(o.StateDir, "cache"), k, o); err != nil {
		return rep, err
	}
	// Logs are the history of attempts the state knows, and capped each;
	// only those of runs it does not know (another state's, a deleted one's)
	// are leftovers.
	for _, d := range logs {
		if _, ok := k.runs[d.ref.Run]; ok {
			continue
		}
		if err := rep.remove(d.path, "crash leftover: log of a run ("+d.ref.Run+") the state does not know", o.DryRun); err != nil {
			return rep, err
		}
	}
	if !o.DryRun {
		// Only the folders that hold attempts (<run>/<task>: staging,
		// heartbeats, logs) or versions (<pipeline>/<artifact>: versions,
		// cache), never an attempt's own folders nor a version's: an
		// output folder made for a task still running is empty until the
		// task writes into it, and a version's empty folder (an output
		// with no files, an empty partition) is part of its bytes.
		for _, f := range []struct {
			name  string
			depth int
		}{{"staging", 4}, {"heartbeats", 4}, {"logs", 4}, {"versions", 2}, {"cache", 2}} {
			removeEmpty(filepath.Join(o.StateDir, f.name), f.depth)
		}
	}
	for _, d := range o.Sinks {
		pruned, err := d.PruneVersions(ctx, sink.PruneOptions{Keep: o.Keep, TmpAge: o.TmpAge, Now: o.Now, DryRun: true})
		if err != nil {
			return rep, fmt.Errorf("sink %s: %w", d.SinkName(), err)
		}
		sizes := map[string]int64{}
		for _, p := range pruned {
			sizes[p.Path] = p.Bytes
			if p.Bytes == 0 {
				sizes[p.Path] = size(p.Path)
			}
		}
		if !o.DryRun {
			if pruned, err = d.PruneVersions(ctx, sink.PruneOptions{Keep: o.Keep, TmpAge: o.TmpAge, Now: o.Now}); err != nil {
				return rep, fmt.Errorf("sink %s: %w", d.SinkName(), err)
			}
		}
		for _, p := range pruned {
			n := sizes[p.Path]
			if n == 0 {
				n = p.Bytes
			}
			rep.Removed = append(rep.Removed, Item{Path: p.Path, Why: "sink " + d.SinkName() + ": " + p.Why, Bytes: n})
			rep.Bytes += n
		}
	}
	return rep, nil
}

// artifactStores are the artifact stores to collect: versions/ beside the
// state, and the configured shared one when it is another.
func artifactStores(o Options) ([]artifacts.Store, error) {
	local, err := artifacts.NewFolder(filepath.Join(o.StateDir, "versions"))
	if err != nil {
		return nil, err
	}
	out := []artifacts.Store{local}
	if f, ok := o.Artifacts.(*artifacts.Folder); ok && f.Root == local.Root {
		return out, nil
	}
	if o.Artifacts != nil {
		out = append(out, o.Artifacts)
	}
	return out, nil
}

// owned returns which of the pipelines (those the state knows) with
// versions in keys s keeps for the state me: all of them unless shared;
// else those no other state owns, recorded as me's unless dry
// (artifacts.Own). The others are reported as Foreign.
func (rep *Report) owned(ctx context.Context, s artifacts.Store, shared bool, keys []artifacts.Key,
	pipelines map[string]bool, me artifacts.Owner, dry bool) (map[string]bool, error) {
	if !shared {
		return pipelines, nil
	}
	ours, asked := map[string]bool{}, map[string]bool{}
	for _, k := range keys {
		p := k.Pipeline
		if !pipelines[p] || asked[p] {
			continue
		}
		asked[p] = true
		owner, ok, err := me, true, error(nil)
		if dry {
			owner, ok, err = artifacts.OwnerOf(ctx, s, p)
		} else {
			err = artifacts.Own(ctx, s, p, me)
		}
		if foreign := (*artifacts.ForeignOwnerError)(nil); errors.As(err, &foreign) {
			owner, err = foreign.Owner, nil
		}
		if err != nil {
			return nil, err
		}
		if ok && owner.State != me.State {
			rep.Foreign = append(rep.Foreign, Foreign{Store: s.String(), Pipeline: p, State: owner.State,
				StatePath: owner.StatePath})
			continue
		}
		ours[p] = true
	}
	return ours, nil
}

// removeKey removes one version from an artifact store while h, gc's hold
// on the versions, lasts (nil: a dry run, which removes nothing).
func (rep *Report) removeKey(ctx context.Context, h *hold, s artifacts.Store, k artifacts.Key, why string) error {
	it := Item{Path: s.String() + "/" + k.String(), Why: why}
	if f, ok := s.(*artifacts.Folder); ok {
		it.Path = f.Path(k)
		it.Bytes = size(it.Path)
	}
	if h != nil {
		rctx, cancel, err := h.removing(ctx)
		if err != nil {
			return fmt.Errorf("stopped removing versions from the artifact store: %w", err)
		}
		err = s.Remove(rctx, k)
		cancel()
		if err != nil {
			return err
		}
	}
	rep.Removed = append(rep.Removed, it)
	rep.Bytes += it.Bytes
	return nil
}

func (rep *Report) remove(path, why string, dry bool) error {
	n := size(path)
	if !dry {
		if err := os.RemoveAll(path); err != nil {
			return err
		}
	}
	rep.Removed = append(rep.Removed, Item{Path: path, Why: why, Bytes: n})
	rep.Bytes += n
	return nil
}

// attemptDir is ROOT/<pipeline>/<interval>/<rN>/<task>/<attempt>: one
// attempt's folder, named as sink.StagingPath names it.
type attemptDir struct {
	path string
	ref  store.AttemptRef
}

// attemptDirs lists the attempt folders under root (run ids have three
// parts, pipeline/interval/rN); anything else at that depth is left alone.
func attemptDirs(root string) ([]attemptDir, error) {
	var out []attemptDir
	err := fswalk.AtDepth(root, 5, nil, func(p string, parts []string, _ fs.DirEntry) {
		if n, err := strconv.Atoi(strings.TrimSuffix(parts[4], ".log")); err == nil && n > 0 {
			out = append(out, attemptDir{path: p, ref: store.AttemptRef{Run: strings.Join(parts[:3], "/"), Task: parts[3], Number: n}})
		}
	})
	return out, err
}

// known is what the store says about every run, attempt and version.
type known struct {
	runs      map[string]store.Run
	attempts  map[store.AttemptRef]store.Attempt
	versions  map[store.AttemptRef][]store.Version
	current   map[int64]bool // the accepted version of its (pipeline, artifact, interval)
	anyActive bool           // a run is running
	// pipelines this state has runs of: the only ones whose versions gc
	// may remove from an artifact store.
	pipelines map[string]bool
	// frozenKept: the artifact store's versions that stay: the current
	// accepted ones, and those a later run or visit audits from there, or
	// audits again (mayBeAudited).
	frozenKept map[string]bool
	// left: attempts whose run was stopped before it audited their outputs
	// (store.EventOutputLeft); newestSuccess: the highest token of a
	// succeeded attempt of each task in each resource (its interval).
	left          map[store.AttemptRef]bool
	newestSuccess map[[2]string]int64
}

func readStore(ctx context.Context, st store.Store) (*known, error) {
	k := &known{runs: map[string]store.Run{}, attempts: map[store.AttemptRef]store.Attempt{},
		versions: map[store.AttemptRef][]store.Version{}, current: map[int64]bool{}, frozenKept: map[string]bool{},
		pipelines: map[string]bool{}, left: map[store.AttemptRef]bool{}, newestSuccess: map[[2]string]int64{}}
	runs, err := st.ListRuns(ctx, store.RunFilter{})
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		k.runs[r.ID] = r
		k.pipelines[r.Pipeline] = true
		if r.State == store.RunRunning {
			k.anyActive = true
		}
		as, err := st.Attempts(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			k.attempts[a.AttemptRef] = a
			if key := [2]string{a.Resource, a.Task}; a.State == store.AttemptSucceeded && a.Token > k.newestSuccess[key] {
				k.newestSuccess[key] = a.Token
			}
		}
		evs, err := st.Events(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			if e.Kind == store.EventOutputLeft {
				k.left[store.AttemptRef{Run: e.Run, Task: e.Task, Number: e.Attempt}] = true
			}
			if e.Kind != store.EventVersionRecorded {
				continue
			}
			var p struct {
				Version int64 `json:"version"`
			}
			if json.Unmarshal(e.Payload, &p) != nil || p.Version == 0 {
				continue
			}
			v, err := st.GetVersion(ctx, p.Version)
			if err != nil {
				continue
			}
			ref := store.AttemptRef{Run: v.Run, Task: v.Task, Number: v.Attempt}
			k.versions[ref] = append(k.versions[ref], v)
			if v.State == store.VersionAccepted {
				cur, err := st.AcceptedVersion(ctx, v.Pipeline, v.Artifact, v.Interval)
				if err == nil && cur.ID == v.ID {
					k.current[v.ID] = true
					k.frozenKept[keyOf(v)] = true
				}
			}
		}
	}
	for ref, vs := range k.versions {
		if k.mayBeAudited(ref) {
			for _, v := range vs {
				k.frozenKept[keyOf(v)] = true
			}
		}
	}
	return k, nil
}

// keyOf is where v is in an artifact store, as a key's string.
func keyOf(v store.Version) string {
	return artifacts.Key{Pipeline: v.Pipeline, Artifact: v.Artifact, Digest: v.Digest}.String()
}

// awaitsAudit reports whether attempt ref's outputs await their audit by a
// later run or visit: its run was stopped before it audited them, it
// succeeded, no later attempt of its task did, and none of its versions
// was accepted or rejected (a task that is not idempotent is not run
// again; its outputs are audited from its staging folder, or from the
// artifact store on another machine).
func (k *known) awaitsAudit(ref store.AttemptRef) bool {
	a, ok := k.attempts[ref]
	if !ok || !k.left[ref] || a.State != store.AttemptSucceeded || k.newestSuccess[[2]string{a.Resource, a.Task}] != a.Token {
		return false
	}
	for _, v := range k.versions[ref] {
		if v.State != store.VersionStaged {
			return false
		}
	}
	return true
}

// mayBeAudited reports whether attempt ref is the newest success of its
// task and a version of it was not accepted: still staged (its run was
// stopped before the audit, or a kill cut the audit short) or rejected by
// a check. A task that is not idempotent is not run again to make
// another: a later run audits that version from the artifact store, at
// once when staged, once a check of it is edited when rejected (a check
// that was wrong, fixed). Until then, or until a later attempt of the
// task succeeds (--force), it is the only copy of what the task's effect
// produced. (An idempotent task's is kept too, in a store its outputs are
// frozen straight into, until its next success makes another.)
func (k *known) mayBeAudited(ref store.AttemptRef) bool {
	a, ok := k.attempts[ref]
	if !ok || a.State != store.AttemptSucceeded || k.newestSuccess[[2]string{a.Resource, a.Task}] != a.Token {
		return false
	}
	return slices.ContainsFunc(k.versions[ref], func(v store.Version) bool { return v.State != store.VersionAccepted })
}

// removableStaging decides one attempt folder.
func (k *known) removableStaging(d attemptDir) (string, bool) {
	r, ok := k.runs[d.ref.Run]
	if !ok {
		return "crash leftover: no run " + d.ref.Run + " in the state", true
	}
	if r.State == store.RunRunning {
		return "", false
	}
	a, ok := k.attempts[d.ref]
	if !ok {
		return "crash leftover: no such attempt in the state", true
	}
	switch a.State {
	case store.AttemptQueued, store.AttemptRunning, store.AttemptUnknown:
		return "", false
	}
	accepted := false
	for _, v := range k.versions[d.ref] {
		if k.current[v.ID] {
			return "", false
		}
		accepted = accepted || v.State == store.VersionAccepted
	}
	if k.awaitsAudit(d.ref) {
		return "", false // the next run audits them from here
	}
	if accepted {
		if k.anyActive {
			return "", false // a running attempt may read a superseded version
		}
		return fmt.Sprintf("staging of a %s attempt whose versions are superseded", a.State), true
	}
	return fmt.Sprintf("staging of a %s attempt with no accepted version", a.State), true
}

// size adds up the sizes of the files under path.
func size(path string) int64 {
	var n int64
	_ = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// removeEmpty removes the empty folders under root down to depth folders
// below it, deepest first (never root itself, nor anything deeper).
func removeEmpty(root string, depth int) {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == root {
			return nil
		}
		dirs = append(dirs, p)
		if rel, _ := filepath.Rel(root, p); strings.Count(filepath.ToSlash(rel), "/")+1 >= depth {
			return filepath.SkipDir
		}
		return nil
	})
	slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
	for _, d := range dirs {
		_ = os.Remove(d) // fails, as it should, when not empty
	}
}
