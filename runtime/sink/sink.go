package sink

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

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
}

// Types lists the sink types Open builds.
func Types() []string { return []string{"directory"} }

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
		d.Pipeline, d.StatePath, d.Lineage, d.Files = c.Pipeline, c.StatePath, c.Lineage, c.Files
		return d, nil
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
		return res, nil
	}
	why := fmt.Sprintf("sink %s (%s) adopted", d.Name, d.Path)
	if reason != "" {
		why += ": " + reason
	}
	if err := d.Store.RaiseTokens(ctx, res.Resources, res.Floor, why); err != nil {
		return AdoptResult{}, err
	}
	b := Binding{State: stateID, StatePath: d.StatePath}
	if prev != nil {
		b.Adoptions = append(b.Adoptions, prev.Adoptions...)
	}
	a := Adoption{To: stateID, ToPath: d.StatePath, Floor: res.Floor, Reason: reason,
		At: now.UTC().Format(time.RFC3339), IntervalsRecorded: len(recs)}
	if prev != nil {
		a.From, a.FromPath = prev.State, prev.StatePath
	}
	b.Adoptions = append(b.Adoptions, a)
	if err := d.writeBinding(b); err != nil {
		return AdoptResult{}, err
	}
	return res, nil
}
