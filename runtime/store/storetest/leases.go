package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
)

// testRunLeases: RunLeases lists the leases of the pipeline's running runs,
// live or expired on the store's clock, and forgets a run once it finished;
// a run created without a lease (one handed to workers) has none.
func testRunLeases(t *testing.T, open single) {
	clock := newFakeClock()
	s := open(t, clock.Now)
	ctx := context.Background()
	leased := func(interval string, pid int, lease time.Duration) store.Run {
		t.Helper()
		r, err := s.CreateRun(ctx, store.NewRun{Pipeline: "orders", Interval: interval, CodeVersion: "1", PlanDigest: "sha256:p",
			Owner: store.RunOwner{Host: "h1", PID: pid}, Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if ls, err := s.RunLeases(ctx, "orders"); err != nil || len(ls) != 0 {
		t.Fatalf("RunLeases of an empty store = %v, %v", ls, err)
	}
	r2 := leased("2024-01-02", 102, time.Second)
	r1 := leased("2024-01-01", 101, 10*time.Second)
	if _, err := s.CreateRun(ctx, store.NewRun{Pipeline: "orders", Interval: "2024-01-03"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateRun(ctx, store.NewRun{Pipeline: "other", Interval: "2024-01-01", Lease: time.Second,
		Owner: store.RunOwner{Host: "h2", PID: 7}}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	ls, err := s.RunLeases(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 {
		t.Fatalf("RunLeases = %+v, want the two leased runs of orders", ls)
	}
	if l := ls[0]; l.Run != r1.ID || l.Interval != "2024-01-01" || l.Owner != (store.RunOwner{Host: "h1", PID: 101}) || !l.Live {
		t.Errorf("first lease = %+v, want %s live, owner h1 pid 101", l, r1.ID)
	}
	if l := ls[1]; l.Run != r2.ID || l.Interval != "2024-01-02" || l.Live {
		t.Errorf("second lease = %+v, want %s expired", l, r2.ID)
	}
	if !ls[0].Expiry.After(ls[0].Since) {
		t.Errorf("lease since %v, expiry %v", ls[0].Since, ls[0].Expiry)
	}
	if err := s.FinishRun(ctx, r1.ID, store.RunSucceeded); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AbandonRun(ctx, r2.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if ls, err := s.RunLeases(ctx, "orders"); err != nil || len(ls) != 0 {
		t.Errorf("RunLeases after the runs ended = %+v, %v", ls, err)
	}
}
