package queue

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/internal/failover"
	"github.com/pipec/pipec/runtime/store"
)

// TestChoosePoolSlots: a candidate whose pool is full is passed over, its
// run saying it waits for a slot in the pool; one whose pool another claim
// holds is passed over silently; a pool with a free slot, or none, is
// claimed as before.
func TestChoosePoolSlots(t *testing.T) {
	l := failover.Limits{Attempts: 1, Global: failover.NoLimit, NoFailover: true}
	live := []string{"w1"}
	cands := []Work{
		{Ref: Ref{Run: "p/2024-01-01/r1", Task: "a"}, Limits: l, Live: live, Pool: "p/backfill", PoolSlots: 2, PoolBusy: 2},
		{Ref: Ref{Run: "p/2024-01-02/r1", Task: "a"}, Limits: l, Live: live, Pool: "p/other", PoolSlots: 1, PoolLocked: true},
		{Ref: Ref{Run: "p/2024-01-03/r1", Task: "a"}, Limits: l, Live: live, Pool: "p/backfill", PoolSlots: 3, PoolBusy: 2},
	}
	p, err := Choose(cands, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if p.Chosen != 2 {
		t.Errorf("chose %d, want 2 (a free slot by its plan's 3)", p.Chosen)
	}
	want := []Waiting{{Run: "p/2024-01-01/r1", Task: "a", Message: "task a: waiting for a slot in pool backfill (2 of 2 busy)"}}
	if diff := cmp.Diff(want, p.Waiting); diff != "" {
		t.Errorf("waiting (-want +got):\n%s", diff)
	}
	if got := Pools(cands); !cmp.Equal(got, []string{"p/backfill", "p/other"}) {
		t.Errorf("Pools = %v", got)
	}
	if k := PoolKey("orders", "backfill"); k != "orders/backfill" || PoolName(k) != "backfill" || PoolKey("orders", "") != "" {
		t.Errorf("PoolKey = %q, PoolName = %q", k, PoolName(k))
	}
}

// TestPlanTasksPools: a task's pool and its slots reach its work row,
// scoped by the pipeline.
func TestPlanTasksPools(t *testing.T) {
	plan := &compiler.Plan{Pipeline: "orders", Pools: []compiler.PlanPool{{Name: "backfill", Slots: 2}},
		Tasks: []compiler.PlanTask{{Name: "load", Pool: "backfill"}, {Name: "extract"}}}
	rows, err := Plan(Submission{Run: store.NewRun{Pipeline: "orders"}, Tasks: PlanTasks(plan)})
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].Pool != "orders/backfill" || rows[0].PoolSlots != 2 || rows[1].Pool != "" || rows[1].PoolSlots != 0 {
		t.Errorf("rows = %+v", rows)
	}
}
