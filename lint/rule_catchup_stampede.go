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

// estimate says how long the catch-up takes, with the estimate `pipec
// backfill --dry-run` makes (compiler.EstimateRuns): every run at once, so
// bounded by the busiest pool and never shorter than one run's longest path
// of task timeouts.
func estimate(pass *Pass, runs int64) string {
	plan := pass.Result.PlanOf()
	if plan == nil {
		return ""
	}
	path, _ := compiler.TimeoutPath(plan)
	e := compiler.EstimateRuns(plan, runs, 0, path)
	pooled := false
	for _, t := range pass.Index.TaskList {
		pooled = pooled || (t.Pool != nil && pass.Index.Pools[t.Pool.Name] != nil)
	}
	switch {
	case e.ByPool:
		at := "≈"
		if e.PoolUntimed {
			at = "at least"
		}
		return fmt.Sprintf(", taking %s %s (%d runs ÷ %d slots of pool %q × %s)", at, fmtHours(e.Total.Hours()), runs, e.PoolSlots, e.Pool, fmtDuration(e.PoolTime))
	case path > 0 && !pooled:
		return fmt.Sprintf(", each up to %s (task timeouts along the longest path), with no pool bounding the load", fmtDuration(path))
	case path > 0:
		return fmt.Sprintf(", taking at least %s (the longest path of task timeouts)", fmtDuration(path))
	}
	return " (add task timeouts for a duration estimate)"
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
