package compiler

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"
)

// Estimate is how long a number of runs of one plan take, from the plan
// alone (and, for a backfill, the time one run took before). It is the one
// estimate pipec makes: `pipec backfill --dry-run` prints it, and the
// catchup-stampede rule quotes it for the runs a catch-up would launch.
//
// The estimate is Runs ÷ AtOnce × PerRun, AtOnce being the smallest of two
// bounds on how many runs go at once:
//   - the run slots (Slots);
//   - the busiest pool: a pool shared by every run serialises them whatever
//     Slots is. It lets PoolSlots × (a run's longest path of task timeouts)
//     ÷ (its tasks' summed timeouts per run) runs go at once: the share of a
//     run its tasks take, so the bound holds whatever PerRun is (measured or
//     the timeouts).
type Estimate struct {
	Runs int64
	// Slots is how many runs go at once; 0 means all of them.
	Slots int64
	// PerRun is one run's duration; 0 when unknown.
	PerRun time.Duration
	// Pool is the busiest pool ("" when no timed task uses a pool), with its
	// slots, its tasks' summed timeouts per run and the runs it lets go at
	// once; PoolUntimed is set when some of its tasks have no timeout (the
	// pool's time is then a lower bound).
	Pool        string
	PoolSlots   int
	PoolTime    time.Duration
	PoolAtOnce  float64
	PoolUntimed bool
	// Path is the longest path of task timeouts (TimeoutPath) the pool's
	// share of a run is measured against.
	Path time.Duration
	// AtOnce is how many runs go at once: the smaller of Slots and
	// PoolAtOnce (0: unbounded, Slots is 0 and no pool bounds the runs).
	AtOnce float64
	// ByPool is set when the busiest pool, not Slots, gives AtOnce.
	ByPool bool
	// Total is the estimate: Waves × PerRun when the run slots bound it,
	// Runs ÷ PoolAtOnce × PerRun when the pool does; saturating instead of
	// overflowing on hostile numbers.
	Total time.Duration
}

// Waves is how many rounds of Slots runs the runs take.
func (e Estimate) Waves() int64 {
	if e.Slots <= 0 || e.Runs == 0 {
		return min(e.Runs, 1)
	}
	return (e.Runs + e.Slots - 1) / e.Slots
}

// EstimateRuns estimates runs runs of p, slots at a time (0: all at once),
// each taking perRun (0: unknown; see TimeoutPath for a bound).
func EstimateRuns(p *Plan, runs, slots int64, perRun time.Duration) Estimate {
	e := Estimate{Runs: runs, Slots: slots, PerRun: perRun, AtOnce: float64(max(slots, 0))}
	e.Total = mulDuration(perRun, float64(e.Waves()))
	path, _ := TimeoutPath(p)
	e.Path = path
	perPool := map[string]time.Duration{}
	untimed := map[string]bool{}
	for _, t := range p.Tasks {
		if t.Pool == "" {
			continue
		}
		d, err := time.ParseDuration(t.Timeout)
		if t.Timeout == "" || err != nil || d <= 0 {
			untimed[t.Pool] = true
			continue
		}
		perPool[t.Pool] = satAdd(perPool[t.Pool], d)
	}
	if path <= 0 {
		// No timeouts along the path: a pool's share of a run is unknown.
		return e
	}
	for _, pool := range slices.SortedFunc(slices.Values(p.Pools), func(a, b PlanPool) int { return cmp.Compare(a.Name, b.Name) }) {
		if pool.Slots <= 0 || perPool[pool.Name] <= 0 {
			continue
		}
		atOnce := float64(pool.Slots) * float64(path) / float64(perPool[pool.Name])
		if e.Pool == "" || atOnce < e.PoolAtOnce {
			e.Pool, e.PoolSlots, e.PoolTime, e.PoolAtOnce, e.PoolUntimed = pool.Name, pool.Slots, perPool[pool.Name], atOnce, untimed[pool.Name]
		}
	}
	if e.Pool != "" && (slots <= 0 || e.PoolAtOnce < float64(slots)) {
		e.AtOnce, e.ByPool = e.PoolAtOnce, true
		e.Total = mulDuration(perRun, float64(runs)/e.PoolAtOnce)
	}
	return e
}

// TimeoutPath is the longest path through the plan's DAG weighted by task
// timeouts: an upper bound of one run, when every task has a timeout.
// Untimed lists, in plan order, the tasks without one (counted as zero).
func TimeoutPath(p *Plan) (longest time.Duration, untimed []string) {
	byName := make(map[string]*PlanTask, len(p.Tasks))
	for i := range p.Tasks {
		byName[p.Tasks[i].Name] = &p.Tasks[i]
	}
	finish := make(map[string]time.Duration, len(p.Tasks))
	for _, id := range p.Order {
		name, ok := strings.CutPrefix(id, KindTask+".")
		if !ok || byName[name] == nil {
			continue
		}
		t := byName[name]
		d, err := time.ParseDuration(t.Timeout)
		if t.Timeout == "" || err != nil || d < 0 {
			untimed = append(untimed, name)
			d = 0
		}
		var start time.Duration
		for _, n := range t.Needs {
			start = max(start, finish[n])
		}
		finish[name] = satAdd(start, d)
		longest = max(longest, finish[name])
	}
	return longest, untimed
}

func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func mulDuration(d time.Duration, f float64) time.Duration {
	x := float64(d) * f
	if x >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(x)
}
