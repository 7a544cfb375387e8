package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
)

// TestRunWaitsForAFreeRunSlot: with MaxActiveRuns 1 and another run of the
// pipeline holding the slot (created on the store as another process
// would), a run is refused with a *store.RunSlotsError; with Wait it says
// once that it waits for a free run slot, naming the run that holds it,
// and starts once that run ended.
func TestRunWaitsForAFreeRunSlot(t *testing.T) {
	f := newFixture(t, leaseHCL, map[string]string{"wait.sh": "exit 0"})
	ctx := context.Background()
	holder, err := f.st.CreateRun(ctx, store.NewRun{Pipeline: "lease", Interval: "2024-01-05", CodeVersion: "x", PlanDigest: "d",
		Owner: store.RunOwner{Host: "elsewhere", PID: 7}, Lease: time.Hour, MaxActive: 1})
	if err != nil {
		t.Fatal(err)
	}
	o := f.options("2024-01-01")
	o.MaxActiveRuns = 1
	_, err = Run(ctx, o)
	var full *store.RunSlotsError
	if !errors.As(err, &full) || len(full.InProgress) != 1 || full.InProgress[0].Run != holder.ID {
		t.Fatalf("err = %v, want a *store.RunSlotsError naming %s", err, holder.ID)
	}
	if runs, err := f.st.ListRuns(ctx, store.RunFilter{Pipeline: "lease", Interval: "2024-01-01"}); err != nil || len(runs) != 0 {
		t.Fatalf("runs of the refused interval = %v, %v", runs, err)
	}

	waiting := make(chan string, 10)
	o.Wait = true
	o.RunLease = 200 * time.Millisecond // the wait polls a tenth of it apart
	o.OnWaitSlot = func(e *store.RunSlotsError) { waiting <- e.Detail() }
	type result struct {
		sum *Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := Run(ctx, o)
		done <- result{sum, err}
	}()
	if d := <-waiting; !strings.Contains(d, "1 of 1 runs of lease are in progress (max_active_runs): "+holder.ID+" (host elsewhere, pid 7,") {
		t.Errorf("waiting for %q", d)
	}
	if err := f.st.FinishRun(ctx, holder.ID, store.RunSucceeded); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.sum == nil || r.sum.Failed {
		t.Fatalf("after the slot freed: %+v, %v", r.sum, r.err)
	}
	if len(waiting) != 0 {
		t.Errorf("told %d more times of the same wait", len(waiting))
	}
}
