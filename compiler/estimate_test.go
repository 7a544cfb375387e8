package compiler

import (
	"testing"
	"time"
)

func estimatePlan() *Plan {
	return &Plan{
		Pools: []PlanPool{{Name: "backfill", Slots: 2}, {Name: "wide", Slots: 100}},
		Tasks: []PlanTask{
			{Name: "extract", Pool: "backfill", Timeout: "10m"},
			{Name: "load", Needs: []string{"extract"}, Timeout: "5m"},
			{Name: "side", Pool: "wide", Timeout: "1m"},
			{Name: "untimed", Pool: "wide"},
		},
		Order: []string{"task.extract", "task.side", "task.untimed", "task.load"},
	}
}

func TestTimeoutPath(t *testing.T) {
	d, untimed := TimeoutPath(estimatePlan())
	if d != 15*time.Minute || len(untimed) != 1 || untimed[0] != "untimed" {
		t.Fatalf("got %s %v", d, untimed)
	}
}

// docs/design.md section 1: 730 runs ÷ 2 slots × 10 min ≈ 61 h, when every run
// goes at once and the pool bounds them.
func TestEstimateBoundedByPool(t *testing.T) {
	e := EstimateRuns(estimatePlan(), 730, 0, 15*time.Minute)
	if !e.ByPool || e.Pool != "backfill" || e.PoolSlots != 2 || e.PoolTime != 10*time.Minute || e.Total != 3650*time.Minute {
		t.Fatalf("got %+v", e)
	}
	if e.PoolUntimed {
		t.Error("the backfill pool's tasks all have timeouts")
	}
}

func TestEstimateBoundedByWaves(t *testing.T) {
	// One run at a time: 730 waves of 15 minutes, longer than the pool's 61 h.
	e := EstimateRuns(estimatePlan(), 730, 1, 15*time.Minute)
	if e.ByPool || e.Waves() != 730 || e.Total != 730*15*time.Minute {
		t.Fatalf("got %+v", e)
	}
	if e := EstimateRuns(estimatePlan(), 5, 2, time.Hour); e.Waves() != 3 || e.Total < 3*time.Hour {
		t.Fatalf("got %+v", e)
	}
}

func TestEstimateSaturates(t *testing.T) {
	e := EstimateRuns(estimatePlan(), 1<<62, 1, time.Hour)
	if e.Total <= 0 {
		t.Fatalf("overflowed: %+v", e)
	}
}

// A measured time per run is what the estimate multiplies, whichever bound
// holds: the pool's share of a run (from the timeouts) turns its slots into
// runs at once, never into the pool's timeouts.
func TestEstimateMeasuredPerRun(t *testing.T) {
	p := &Plan{
		Pools: []PlanPool{{Name: "backfill", Slots: 2}},
		Tasks: []PlanTask{
			{Name: "events", Pool: "backfill", Timeout: "10m"},
			{Name: "totals", Pool: "backfill", Needs: []string{"events"}, Timeout: "10m"},
		},
		Order: []string{"task.events", "task.totals"},
	}
	// One run at a time (an input at offset -1): the run slots bound it.
	e := EstimateRuns(p, 17, 1, 24*time.Millisecond)
	if e.ByPool || e.AtOnce != 1 || e.Total != 17*24*time.Millisecond || e.PoolAtOnce != 2 {
		t.Fatalf("got %+v, want 17 × 24ms by the run slots", e)
	}
	// Four run slots: the pool's two (busy the whole run) bound it.
	e = EstimateRuns(p, 17, 4, 24*time.Millisecond)
	if !e.ByPool || e.AtOnce != 2 || e.Total != 204*time.Millisecond {
		t.Fatalf("got %+v, want 17 ÷ 2 × 24ms by the pool", e)
	}
}
