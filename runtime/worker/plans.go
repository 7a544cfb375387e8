package worker

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime"
)

// submitted is a run's plan, read once per run by a worker.
type submitted struct {
	decodedPlan
	baseDir  string
	interval string
	// forced: the run reuses nothing from earlier runs (store.Run.Forced).
	forced bool
}

// planCache keeps the plans of the last runs a worker ran tasks of, and the
// plans decoded for them by their content: a plan of a thousand tasks is
// large, a worker runs many tasks of one run, and the runs of a backfill or
// a schedule submit one plan again and again. Decoding a plan was about 7%
// of a worker's CPU on a 1,000-task run, once per run and worker.
type planCache struct {
	mu    sync.Mutex
	runs  bounded[string, *submitted]
	plans bounded[planKey, decodedPlan]
}

// planKey is a plan by its JSON's digest, submitted from a spec's folder
// (a setup's paths are made from it).
type planKey struct {
	sum     [sha256.Size]byte
	baseDir string
}

// decodedPlan is a plan decoded, and the setup its visits share; runs of
// one plan share both (a setup fits the options of every interval).
type decodedPlan struct {
	plan *compiler.Plan
	// setup is runtime.PreparePlan of visitOptions; nil when it could not
	// be made, and then each visit derives its own (and says why it
	// cannot).
	setup *runtime.PlanSetup
}

const planCacheSize = 16

func newPlanCache() *planCache {
	return &planCache{runs: newBounded[string, *submitted](planCacheSize), plans: newBounded[planKey, decodedPlan](planCacheSize)}
}

// plan is run's plan: read from the queue once per run, and decoded (its
// setup prepared) once per plan and folder.
func (c *Config) plan(ctx context.Context, run string) (*submitted, error) {
	pc := c.plans
	pc.mu.Lock()
	s, ok := pc.runs.get(run)
	pc.mu.Unlock()
	if ok {
		return s, nil
	}
	sr, err := c.Queue.Submitted(ctx, run)
	if err != nil {
		return nil, err
	}
	key := planKey{sha256.Sum256(sr.Plan), sr.BaseDir}
	pc.mu.Lock()
	d, ok := pc.plans.get(key)
	pc.mu.Unlock()
	s = &submitted{decodedPlan: d, baseDir: sr.BaseDir, interval: sr.Interval, forced: sr.Forced}
	if !ok {
		var p compiler.Plan
		if err := json.Unmarshal(sr.Plan, &p); err != nil {
			return nil, fmt.Errorf("the submitted plan does not decode: %w", err)
		}
		s.plan = &p
		if setup, err := runtime.PreparePlan(c.visitOptions(s)); err == nil {
			s.setup = setup
		}
		d = s.decodedPlan
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if !ok {
		pc.plans.add(key, d)
	}
	if first, ok := pc.runs.get(run); ok {
		return first, nil // another visit of the run read it meanwhile
	}
	pc.runs.add(run, s)
	return s, nil
}

// bounded is a map that keeps its last n entries added.
type bounded[K comparable, V any] struct {
	n     int
	m     map[K]V
	order []K
}

func newBounded[K comparable, V any](n int) bounded[K, V] {
	return bounded[K, V]{n: n, m: map[K]V{}}
}

func (b *bounded[K, V]) get(k K) (V, bool) {
	v, ok := b.m[k]
	return v, ok
}

func (b *bounded[K, V]) add(k K, v V) {
	if _, ok := b.m[k]; !ok {
		b.order = append(b.order, k)
	}
	b.m[k] = v
	if len(b.order) > b.n {
		delete(b.m, b.order[0])
		b.order = b.order[1:]
	}
}
