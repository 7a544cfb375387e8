package lint

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
)

var ruleCatchupStampede = Rule{
	ID:       "catchup-stampede",
	Severity: diag.Warning,
	Doc: `catchup = true with no bound on concurrent runs; says how many runs and how long

A schedule with catchup = true and no max_active_runs.

Catch-up launches every interval missed since the schedule's start, and with
no bound on concurrent runs it launches them all at once: two years of daily
partitions are 730 runs hitting the same sources and sinks together. The
message counts the runs from start to now and, where task timeouts and pools
allow, estimates how long they take: runs ÷ pool slots × the timeouts of the
pool's tasks per run (730 runs ÷ 2 slots × 10m ≈ 61h). Turn catch-up off and
backfill with pipec backfill and a bounded pool, or set max_active_runs.

Bad:

    pipeline "orders" {
      schedule {
        every   = "24h"
        start   = "2024-01-01T00:00:00Z"
        catchup = true
      }
      pool "backfill" {
        slots = 2
      }
      task "extract" {
        command = ["./extract.sh"]
        pool    = "backfill"
        timeout = "10m"
      }
    }

Fixed:

    pipeline "orders" {
      schedule {
        every           = "24h"
        start           = "2024-01-01T00:00:00Z"
        catchup         = true
        max_active_runs = 2
      }
      pool "backfill" {
        slots = 2
      }
      task "extract" {
        command = ["./extract.sh"]
        pool    = "backfill"
        timeout = "10m"
      }
    }
`,
	Run: runCatchupStampede,
}

func runCatchupStampede(pass *Pass) error {
	s := pass.Spec.Schedule
	// A max_active_runs the loader refused is a bound the author meant:
	// schema reports it, and this rule does not add "no bound".
	if s == nil || !s.Catchup || s.MaxActiveRuns > 0 || s.Refused("max_active_runs") {
		return nil
	}
	r := s.At("catchup", s.Range)
	unbounded := "no max_active_runs"
	if s.Has("max_active_runs") {
		unbounded = "max_active_runs = 0 (no bound)"
	}
	fix := "set max_active_runs, or set catchup = false and backfill with pipec backfill and a bounded pool"
	if s.Start.IsZero() || s.Every <= 0 {
		pass.Reportf(r, "catchup = true with %s launches every missed interval at once; %s", unbounded, fix)
		return nil
	}
	runs := int64(0)
	if pass.Now.After(s.Start) {
		runs = int64(pass.Now.Sub(s.Start) / s.Every)
	}
	what := fmt.Sprintf("%d runs (every %s since %s)", runs, fmtDuration(s.Every), s.Start.Format(time.RFC3339))
	if runs <= 1 {
		pass.Reportf(r, "catchup = true with %s: only %s today, but every interval missed later (an outage, a paused scheduler) launches at once; %s", unbounded, strings.Replace(what, " runs", " run(s)", 1), fix)
		return nil
	}
	pass.Reportf(r, "catchup = true with %s: %s would launch at once%s; %s", unbounded, what, estimate(pass, runs), fix)
	return nil
}

// estimate says how long the catch-up takes: bounded by the busiest pool
// (runs ÷ slots × the pool's task time per run), and never less than one run's
// longest path of task timeouts.
func estimate(pass *Pass, runs int64) string {
	ix := pass.Index
	perPool := map[string]time.Duration{}
	untimed := false
	for _, t := range ix.TaskList {
		if t.Pool == nil || ix.Pools[t.Pool.Name] == nil {
			continue
		}
		perPool[t.Pool.Name] += t.Timeout
		untimed = untimed || t.Timeout == 0
	}
	path := longestTimeoutPath(pass)
	best, bestHours := "", -1.0
	for _, name := range sortedPoolNames(perPool) {
		slots := ix.Pools[name].Slots
		if slots <= 0 || perPool[name] <= 0 {
			continue
		}
		hours := float64(runs) / float64(slots) * perPool[name].Hours()
		if hours > bestHours {
			bestHours = hours
			best = fmt.Sprintf("%d runs ÷ %d slots of pool %q × %s", runs, slots, name, fmtDuration(perPool[name]))
		}
	}
	at := "≈"
	if untimed {
		at = "at least"
	}
	switch {
	case bestHours >= path.Hours():
		return fmt.Sprintf(", taking %s %s (%s)", at, fmtHours(bestHours), best)
	case path > 0 && len(perPool) == 0:
		return fmt.Sprintf(", each up to %s (task timeouts along the longest path), with no pool bounding the load", fmtDuration(path))
	case path > 0:
		return fmt.Sprintf(", taking at least %s (the longest path of task timeouts)", fmtDuration(path))
	}
	return " (add task timeouts for a duration estimate)"
}

// longestTimeoutPath is one run's critical path of task timeouts, computed in
// one pass over the topological order.
func longestTimeoutPath(pass *Pass) time.Duration {
	g := pass.Result.Graph
	if g == nil {
		return 0
	}
	dist := make(map[string]time.Duration, len(g.Order))
	var longest time.Duration
	for _, n := range g.Order {
		var d time.Duration
		for _, p := range g.Pred[n] {
			d = max(d, dist[p])
		}
		if name, ok := strings.CutPrefix(n, compiler.KindTask+"."); ok {
			if t := pass.Index.Tasks[name]; t != nil && d < math.MaxInt64-t.Timeout {
				d += t.Timeout
			}
		}
		dist[n] = d
		longest = max(longest, d)
	}
	return longest
}

func sortedPoolNames(m map[string]time.Duration) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	return sortStrings(names)
}

// fmtDuration writes "10m", "1h30m", "24h" rather than Go's "10m0s".
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// fmtHours writes a long estimate in whole hours, with days when it is long.
func fmtHours(h float64) string {
	switch {
	case h < 1:
		return fmt.Sprintf("%.0fm", math.Ceil(h*60))
	case h < 72:
		return fmt.Sprintf("%.0fh", math.Round(h))
	}
	return fmt.Sprintf("%.0fh (%.0f days)", math.Round(h), math.Round(h/24))
}
