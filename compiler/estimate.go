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
// Two bounds, the larger wins:
//   - waves: Runs ÷ Slots runs at a time, each taking PerRun;
//   - the busiest pool: Runs × the time its tasks take per run ÷ its slots,
//     since a pool shared by every run serialises them whatever Slots is.
type Estimate struct {
	Runs int64
	// Slots is how many runs go at once; 0 means all of them.
	Slots int64
	// PerRun is one run's duration; 0 when unknown.
	PerRun time.Duration
	// Pool is the busiest pool ("" when no timed task uses a pool), with its
	// slots and its tasks' summed timeouts per run; PoolUntimed is set when
	// some of its tasks have no timeout (the pool's time is then a lower
	// bound).
	Pool        string
	PoolSlots   int
	PoolTime    time.Duration
	PoolUntimed bool
	// Total is the estimate: the larger bound, saturating instead of
	// overflowing on hostile numbers.
	Total time.Duration
	// ByPool is set when the busiest pool, not the waves, gives Total.
	ByPool bool
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
	e := Estimate{Runs: runs, Slots: slots, PerRun: perRun}
	wavesTime := mulDuration(perRun, float64(e.Waves()))
	e.Total = wavesTime
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
	best := -1.0
	for _, pool := range slices.SortedFunc(slices.Values(p.Pools), func(a, b PlanPool) int { return cmp.Compare(a.Name, b.Name) }) {
		if pool.Slots <= 0 || perPool[pool.Name] <= 0 {
			continue
		}
		load := float64(runs) / float64(pool.Slots) * float64(perPool[pool.Name])
		if load > best {
			best = load
			e.Pool, e.PoolSlots, e.PoolTime, e.PoolUntimed = pool.Name, pool.Slots, perPool[pool.Name], untimed[pool.Name]
		}
	}
	if e.Pool != "" && best >= float64(wavesTime) {
		e.Total, e.ByPool = mulDuration(1, best), true
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
