package webview

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
)

// VersionView is one version of an artifact with its lineage, as pipec show
// prints it.
type VersionView struct {
	ID          int64
	Label       string
	Interval    string
	Digest      string
	State       string
	Reason      string
	CodeVersion string
	Run         string
	Task        string
	Attempt     int
	Token       int64
	Checks      []string
	Created     time.Time
	// Held says whether the sink still holds the version's copy: "yes",
	// "no" (pruned), or "" when the sink is not known or not readable here.
	Held string
}

// VisibleView is what one sink shows for one interval.
type VisibleView struct {
	Sink     string
	Interval string
	Unfenced bool
	Updated  time.Time
	Version  VersionView
	Older    []VersionView
}

// ArtifactView is the artifact page.
type ArtifactView struct {
	Pipeline, Artifact string
	Visible            []VisibleView
	// Unpublished are versions of intervals no sink shows.
	Unpublished []VersionView
	Note        string
}

// LoadArtifact reads what the state knows of one artifact of a pipeline:
// its versions (found through the version.recorded events of the
// pipeline's runs), the sinks' pointers, and the checks that accepted each.
func (s *Source) LoadArtifact(ctx context.Context, pipeline, artifact string) (*ArtifactView, error) {
	runs, err := s.Store.ListRuns(ctx, store.RunFilter{Pipeline: pipeline})
	if err != nil {
		return nil, err
	}
	av := &ArtifactView{Pipeline: s.text(pipeline), Artifact: s.text(artifact)}
	versions := map[int64]store.Version{}
	checks := map[int64][]string{}
	sinks := map[string]bool{}
	for _, r := range runs {
		f, err := s.facts(ctx, r)
		if err != nil {
			return nil, err
		}
		for _, rec := range f.versions {
			if _, ok := versions[rec.id]; ok || rec.artifact != artifact {
				continue
			}
			v, err := s.Store.GetVersion(ctx, rec.id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if v.Artifact == artifact && v.Pipeline == pipeline {
				versions[rec.id] = v
			}
		}
		for _, c := range f.checks {
			if c.artifact == artifact {
				checks[c.version] = append(checks[c.version], s.text(c.check)+" (in "+s.text(r.ID)+")")
			}
		}
		for _, p := range f.sinks {
			if p.artifact == artifact {
				sinks[p.sink] = true
			}
		}
	}
	// What each sink still holds, from the plans known here: the specs
	// given, else the plan of the pipeline's newest run when it was
	// submitted (the state keeps it with its spec's folder). A sink that
	// cannot be read now (an object store out of reach) shows nothing.
	held := map[string]map[string]bool{}
	specs := s.Specs
	if !slices.ContainsFunc(specs, func(sp Spec) bool { return sp.Plan.Pipeline == pipeline }) && len(runs) > 0 {
		if p, dir, _ := s.planOf(ctx, runs[len(runs)-1]); p != nil && dir != "" {
			specs = []Spec{{Plan: p, Dir: dir}}
		}
	}
	known := false
	for _, sp := range specs {
		if sp.Plan.Pipeline != pipeline {
			continue
		}
		for _, pub := range sp.Plan.Publishes {
			if pub.Artifact == artifact {
				sinks[pub.Sink] = true
			}
		}
		for _, sk := range sp.Plan.Sinks {
			if !sinks[sk.Name] {
				continue
			}
			known = true
			m, err := sink.OpenManaged(sink.Config{Name: sk.Name, Type: sk.Type, Path: sk.Path, Fencing: sk.Fencing,
				BaseDir: sp.Dir, Pipeline: pipeline, Store: s.Store, ObjectStores: &s.objects})
			if err != nil {
				continue
			}
			if names, err := m.HeldVersions(ctx); err == nil {
				held[sk.Name] = names
			}
		}
	}
	if !known {
		av.Note = "which older versions a sink still holds is shown when the viewer is given the pipeline's spec (--spec)"
	}
	view := func(v store.Version, sinkName string) VersionView {
		vv := VersionView{ID: v.ID, Label: s.text(v.Label()), Interval: s.text(v.Interval), Digest: s.text(v.Digest), State: string(v.State),
			Reason: s.text(v.Reason), CodeVersion: s.text(v.CodeVersion), Run: v.Run, Task: s.text(v.Task), Attempt: v.Attempt,
			Token: v.Token, Checks: checks[v.ID], Created: v.Created}
		if names, ok := held[sinkName]; ok && v.State == store.VersionAccepted {
			vv.Held = "no"
			if names[sink.VersionName(v)] {
				vv.Held = "yes"
			}
		}
		return vv
	}
	shown := map[string]bool{} // intervals some sink shows
	for _, name := range slices.Sorted(mapKeys(sinks)) {
		ps, err := s.Store.Pointers(ctx, pipeline, name)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			if p.Artifact != artifact {
				continue
			}
			v, ok := versions[p.Version]
			if !ok {
				if v, err = s.Store.GetVersion(ctx, p.Version); err != nil {
					continue
				}
			}
			vis := VisibleView{Sink: s.text(name), Interval: s.text(p.Interval), Unfenced: p.Unfenced, Updated: p.Updated, Version: view(v, name)}
			for _, o := range sortedVersions(versions) {
				if o.Interval == p.Interval && o.ID != v.ID && o.State == store.VersionAccepted {
					vis.Older = append(vis.Older, view(o, name))
				}
			}
			shown[p.Interval] = true
			av.Visible = append(av.Visible, vis)
		}
	}
	for _, v := range sortedVersions(versions) {
		if !shown[v.Interval] {
			av.Unpublished = append(av.Unpublished, view(v, ""))
		}
	}
	return av, nil
}

func sortedVersions(m map[int64]store.Version) []store.Version {
	out := make([]store.Version, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b store.Version) int {
		if c := strings.Compare(a.Interval, b.Interval); c != 0 {
			return c
		}
		return int(b.Token - a.Token)
	})
	return out
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

// WorkerView is one worker.
type WorkerView struct {
	Name, Host, State, Labels, Running string
	PID, Slots                         int
	Live                               bool
	Ago                                string
	Started, LastSeen                  time.Time
	Failover                           []string
}

// Workers lists the workers of the state (nil, false when the state cannot
// serve workers).
func (s *Source) Workers(ctx context.Context) ([]WorkerView, bool, error) {
	if s.Queue == nil {
		return nil, false, nil
	}
	ws, err := s.Queue.Workers(ctx)
	if err != nil {
		return nil, true, err
	}
	var out []WorkerView
	for _, w := range ws {
		state := w.State
		if state == queue.WorkerLive && !w.Live {
			state = "lost"
		}
		wv := WorkerView{Name: s.text(w.Name), Host: s.text(w.Host), State: state, PID: w.PID, Slots: w.Slots, Live: w.Live && w.State == queue.WorkerLive,
			Labels: s.text(strings.Join(w.Labels, ", ")), Running: s.text(strings.Join(w.Running, "; ")), Ago: roundDur(w.Ago),
			Started: w.Started, LastSeen: w.LastSeen}
		for _, f := range w.Failover {
			wv.Failover = append(wv.Failover, s.text(f))
		}
		out = append(out, wv)
	}
	return out, true, nil
}
