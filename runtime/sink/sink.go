package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/pipec/pipec/runtime/objstore"
	"github.com/pipec/pipec/runtime/store"
)

// Sink is a place accepted versions are published to. The runtime knows
// sinks only through it; the directory sink is the first kind.
type Sink interface {
	// Publish makes an accepted version visible, fenced by its token, and
	// says what happened (Result.Outcome). An error means nothing is known
	// to have been decided (a retry of the same publish is safe).
	Publish(ctx context.Context, v store.Version) (Result, error)
	// ReconcileAll brings what the sink shows in line with its own record
	// after a crash, and returns how many names it changed.
	ReconcileAll(ctx context.Context) (int, error)
}

// Managed is a sink pipec owns: it keeps its own fencing record and binding,
// and pipec reads it back. pipec show, pipec gc --keep, pipec sink show and
// pipec sink adopt are written against it, so every kind (the directory
// sink, the s3 sink) plugs in the same way. The fencing rule itself is
// runtime/fence's, decided the same way by every kind.
type Managed interface {
	Sink
	// SinkName is the sink's name in the spec.
	SinkName() string
	// Place names the sink: its folder, or its s3:// URL.
	Place() string
	// VisibleVersion resolves what readers see at interval, once, and reads
	// that version's lineage manifest. An error wrapping fs.ErrNotExist
	// means nothing is published there; an error with a Visible whose
	// Location is set means the version is there but its manifest is not
	// readable.
	VisibleVersion(ctx context.Context, interval string) (Visible, error)
	// Intervals lists the intervals with a visible version, sorted.
	Intervals(ctx context.Context) ([]string, error)
	// FenceRecords returns the sink's binding (nil: no state published to
	// it yet) and its fencing record of every interval, sorted.
	FenceRecords(ctx context.Context) (*Binding, []Record, error)
	// Adopt binds the sink to its Store's state (pipec sink adopt).
	Adopt(ctx context.Context, reason string, now time.Time) (AdoptResult, error)
	// PruneVersions removes superseded versions (pipec gc --keep).
	PruneVersions(ctx context.Context, opts PruneOptions) ([]Pruned, error)
	// HeldVersions names (VersionName) the versions the sink still keeps
	// a copy of, for what pipec ui shows as pruned.
	HeldVersions(ctx context.Context) (map[string]bool, error)
	// StateStore is the state the sink judges publishes with.
	StateStore() store.Store
}

// Visible is the version a sink shows at an interval.
type Visible struct {
	// Pointer is what readers open: the interval's link, or its pointer
	// object's URL.
	Pointer string
	// Location is the immutable version the pointer names now: a folder,
	// or the s3:// prefix under which its files and _pipec.json lie. Read
	// every file from there.
	Location string
	// Name is the version's name (VersionName).
	Name     string
	Manifest Manifest
}

// Config is what Open needs: a sink of the plan and the run's context.
type Config struct {
	Name, Type, Path, Fencing string
	// BaseDir resolves a relative Path (the spec's folder).
	BaseDir  string
	Pipeline string
	Store    store.Store
	// StatePath names the store in messages.
	StatePath string
	// Lineage supplies each published version's manifest what the version
	// record lacks (see manifest.go); nil writes the manifest without checks.
	Lineage Lineage
	// Files is where a version's files are read from (Directory.Files).
	Files Files
	// ObjectStores builds an s3 sink's client (nil: one of its own).
	ObjectStores *objstore.Clients
	// Shown is a directory sink's Directory.Shown (nil: none).
	Shown *Shown
}

// Types lists the sink types Open builds.
func Types() []string { return []string{"directory", "s3"} }

// OpenManaged is Open for a sink pipec can read back (every type Open
// builds today).
func OpenManaged(c Config) (Managed, error) {
	s, err := Open(c)
	if err != nil {
		return nil, err
	}
	m, ok := s.(Managed)
	if !ok {
		return nil, fmt.Errorf("sink %s (type %s) keeps no fencing record pipec can read", c.Name, c.Type)
	}
	return m, nil
}

// Open builds the sink of c.Type. A type this runtime cannot publish to is
// an error naming the ones it can.
func Open(c Config) (Sink, error) {
	switch c.Type {
	case "directory":
		path := c.Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(c.BaseDir, path)
		}
		d, err := NewDirectory(c.Name, path, c.Fencing, c.Store)
		if err != nil {
			return nil, err
		}
		d.Pipeline, d.StatePath, d.Lineage, d.Files, d.Shown = c.Pipeline, c.StatePath, c.Lineage, c.Files, c.Shown
		return d, nil
	case "s3":
		s, err := NewS3(context.Background(), c.Name, c.Path, c.Fencing, c.Store, c.ObjectStores)
		if err != nil {
			return nil, err
		}
		s.Pipeline, s.StatePath, s.Lineage, s.Files = c.Pipeline, c.StatePath, c.Lineage, c.Files
		return s, nil
	}
	return nil, fmt.Errorf("sink type %q is not supported by the local runtime (supported: %q)", c.Type, Types())
}

// Adoption's outcome.
type AdoptResult struct {
	Previous *Binding
	Floor    int64
	// Resources are the fenced resources whose tokens were raised.
	Resources []string
	// Same is true when the sink was already bound to the state (nothing
	// changed but the record of the request).
	Same bool
}

// Adopt binds the sink to st (its StateID), as `pipec sink adopt` does.
// Under the sink's lock, it first raises st's tokens, durably, above every
// token the sink's records hold for their pipeline and interval, so that
// every later publish of st is above what the sink has seen; only then does
// it write the new binding, with the adoption appended to its history. A
// crash in between leaves the sink bound to the old state, and adopting
// again is safe. reason is recorded in both.
func (d *Directory) Adopt(ctx context.Context, reason string, now time.Time) (AdoptResult, error) {
	stateID, err := d.Store.StateID(ctx)
	if err != nil {
		return AdoptResult{}, err
	}
	if err := mkdirAll(d.Path); err != nil {
		return AdoptResult{}, err
	}
	unlock, err := lockFile(filepath.Join(d.Path, ".lock"))
	if err != nil {
		return AdoptResult{}, err
	}
	defer unlock()
	prev, err := d.readBinding()
	if err != nil {
		return AdoptResult{}, err
	}
	recs, err := d.Records()
	if err != nil {
		return AdoptResult{}, err
	}
	res, b, err := adopt(ctx, d.Store, stateID, fmt.Sprintf("sink %s (%s)", d.Name, d.Path), d.StatePath, reason, now, prev, recs)
	if err != nil || b == nil {
		return res, err
	}
	if err := d.writeBinding(*b); err != nil {
		return AdoptResult{}, err
	}
	return res, nil
}

// swapInStore is the state's half of every sink's publish: the store's
// compare-and-swap of the pointer (which also fences at grant), its outcome
// and what fenced it recorded in res. won: the sink may make v visible.
func swapInStore(ctx context.Context, st store.Store, sinkName string, v store.Version, expect *int64, res *Result) (won bool, err error) {
	cas, err := st.CompareAndSwapPointer(ctx, store.Swap{Pipeline: v.Pipeline, Sink: sinkName, Artifact: v.Artifact,
		Interval: v.Interval, Version: v.ID, Token: v.Token, Unfenced: res.Unfenced, Expect: expect})
	if err != nil {
		return false, fmt.Errorf("publish %s to %s: %w", v.Label(), sinkName, err)
	}
	res.Outcome, res.Pointer, res.generation = cas.Outcome, cas.Pointer, cas.Generation
	switch {
	case cas.Outcome == store.Fenced && cas.GrantedToken > 0:
		res.FencedBy, res.HeldToken = "grant", cas.GrantedToken
	case cas.Outcome == store.Fenced:
		res.FencedBy, res.HeldToken = "pointer", cas.Pointer.Token
	}
	return cas.Outcome == store.Won || cas.Outcome == store.Idempotent, nil
}

// fencedBySink is every sink's publish of v refused by its own record
// rec (fence.Decide said Fenced): the outcome and the store's pointer in
// res, and publish.fenced in the store's log.
func fencedBySink(ctx context.Context, st store.Store, sinkName string, v store.Version, rec *Record, res *Result) error {
	res.Outcome, res.FencedBy, res.HeldToken = store.Fenced, "sink", rec.Token
	res.Pointer, _ = st.Pointer(ctx, v.Pipeline, sinkName, v.Artifact, v.Interval)
	payload, _ := json.Marshal(map[string]any{"sink": sinkName, "artifact": v.Artifact, "interval": v.Interval,
		"label": v.Label(), "token": v.Token, "current_token": rec.Token, "fenced_by": "sink", "sink_state": rec.State})
	_, err := st.AppendEvent(ctx, store.Event{Run: v.Run, Kind: store.EventPublishFenced, Task: v.Task,
		Attempt: v.Attempt, Payload: payload})
	return err
}

// adopt is the state's half of every sink's adoption: from the sink's
// records, the tokens this state must grant above (raised durably here,
// before the binding moves), and the binding to write (nil when the sink is
// bound to this state already).
func adopt(ctx context.Context, st store.Store, stateID, sinkName, statePath, reason string, now time.Time,
	prev *Binding, recs []Record) (AdoptResult, *Binding, error) {
	res := AdoptResult{Previous: prev}
	for _, r := range recs {
		res.Floor = max(res.Floor, r.Token)
		if rs := store.FenceResource(r.Pipeline, r.Interval); !slices.Contains(res.Resources, rs) {
			res.Resources = append(res.Resources, rs)
		}
	}
	slices.Sort(res.Resources)
	if prev != nil && prev.State == stateID {
		res.Same = true
		return res, nil, nil
	}
	why := sinkName + " adopted"
	if reason != "" {
		why += ": " + reason
	}
	if err := st.RaiseTokens(ctx, res.Resources, res.Floor, why); err != nil {
		return AdoptResult{}, nil, err
	}
	b := Binding{State: stateID, StatePath: statePath}
	a := Adoption{To: stateID, ToPath: statePath, Floor: res.Floor, Reason: reason,
		At: now.UTC().Format(time.RFC3339), IntervalsRecorded: len(recs)}
	if prev != nil {
		b.Pipeline, b.Artifact = prev.Pipeline, prev.Artifact
		b.Adoptions = append(b.Adoptions, prev.Adoptions...)
		a.From, a.FromPath = prev.State, prev.StatePath
	}
	b.Adoptions = append(b.Adoptions, a)
	return res, &b, nil
}
