package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// The checks of the issue-7 guarantees: fence at grant, the pipeline scope,
// the run lease on an interval, the state's identity, raised tokens and the
// attempt state machine enforced by conditional updates.

func testFenceAtGrant(t *testing.T, open single) {
	s := open(t, nil)
	ctx := context.Background()
	r := newRun(t, s, "2024-01-01")
	// Attempt 1 produced an accepted version, then its lease expired and
	// attempt 2 was granted a higher token; attempt 2 has not published.
	v1 := publishable(t, s, r.ID, "clean", "orders_clean", "2024-01-01", "sha256:aa")
	a2, err := s.StartAttempt(ctx, store.AttemptSpec{Run: r.ID, Task: "clean", Resource: "orders@2024-01-01"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.CompareAndSwapPointer(ctx, store.Swap{Pipeline: "orders", Sink: "warehouse", Artifact: "orders_clean",
		Interval: "2024-01-01", Version: v1.ID, Token: v1.Token})
	if err != nil || res.Outcome != store.Fenced || res.GrantedToken != a2.Token {
		t.Fatalf("publish of a stale attempt before its successor published = %+v, %v; want fenced by grant %d", res, err, a2.Token)
	}
	if _, err := s.Pointer(ctx, "orders", "warehouse", "orders_clean", "2024-01-01"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a pointer appeared: %v", err)
	}
	// Attempt 2 ends without having started (a worker's claim whose visit
	// completed the task from attempt 1 instead): it never produced
	// anything and never will, so attempt 1 is the artifact's producer
	// again. A later grant fences it anew.
	if err := s.FinishAttempt(ctx, a2.AttemptRef, queue.UnusedOutcome()); err != nil {
		t.Fatal(err)
	}
	res, err = s.CompareAndSwapPointer(ctx, store.Swap{Pipeline: "orders", Sink: "warehouse", Artifact: "orders_clean",
		Interval: "2024-01-01", Version: v1.ID, Token: v1.Token})
	if err != nil || res.Outcome != store.Won {
		t.Fatalf("publish after the higher grant ended unstarted = %+v, %v; want won", res, err)
	}
	v3 := publishable(t, s, r.ID, "clean", "orders_clean", "2024-01-01", "sha256:ab")
	if _, err := s.StartAttempt(ctx, store.AttemptSpec{Run: r.ID, Task: "clean", Resource: "orders@2024-01-01"}); err != nil {
		t.Fatal(err)
	}
	res, err = s.CompareAndSwapPointer(ctx, store.Swap{Pipeline: "orders", Sink: "warehouse", Artifact: "orders_clean",
		Interval: "2024-01-01", Version: v3.ID, Token: v3.Token})
	if err != nil || res.Outcome != store.Fenced || res.GrantedToken <= v3.Token {
		t.Fatalf("publish with a queued attempt granted since = %+v, %v; want fenced by grant", res, err)
	}
	// Another task's higher grant in the same resource does not fence it:
	// only attempts producing the artifact count.
	r2 := newRun(t, s, "2024-01-02")
	w1 := publishable(t, s, r2.ID, "clean", "orders_clean", "2024-01-02", "sha256:bb")
	if _, err := s.StartAttempt(ctx, store.AttemptSpec{Run: r2.ID, Task: "load", Resource: "orders@2024-01-02"}); err != nil {
		t.Fatal(err)
	}
	res, err = s.CompareAndSwapPointer(ctx, store.Swap{Pipeline: "orders", Sink: "warehouse", Artifact: "orders_clean",
		Interval: "2024-01-02", Version: w1.ID, Token: w1.Token})
	if err != nil || res.Outcome != store.Won {
		t.Fatalf("publish with another task's higher grant = %+v, %v; want won", res, err)
	}
	// The grant outlives the run: a rerun's attempt fences the crashed run's.
	evs, err := s.Events(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs {
		found = found || (e.Kind == store.EventPublishFenced && e.Attempt == v1.Attempt)
	}
	if !found {
		t.Error("no publish.fenced event for the fenced publish")
	}
}

func testPipelineScope(t *testing.T, open single) {
	s := open(t, nil)
	ctx := context.Background()
	mk := func(pipeline string) store.Run {
		r, err := s.CreateRun(ctx, store.NewRun{Pipeline: pipeline, Interval: "2024-01-01", CodeVersion: "1", PlanDigest: "sha256:p"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ra, rb := mk("a"), mk("b")
	if ra.ID != "a/2024-01-01/r1" || rb.ID != "b/2024-01-01/r1" {
		t.Fatalf("run ids %s %s", ra.ID, rb.ID)
	}
	aa, err := s.StartAttempt(ctx, store.AttemptSpec{Run: ra.ID, Task: "t", Resource: store.FenceResource("a", "2024-01-01")})
	if err != nil {
		t.Fatal(err)
	}
	va, err := s.RecordVersion(ctx, store.Version{Artifact: "out", Interval: "2024-01-01", Digest: "sha256:aa", Run: ra.ID,
		Task: "t", Attempt: aa.Number, Location: "p/a/00"})
	if err != nil || va.Pipeline != "a" {
		t.Fatalf("RecordVersion = %+v, %v; want pipeline a", va, err)
	}
	if err := s.AcceptVersion(ctx, va.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcceptedVersion(ctx, "b", "out", "2024-01-01"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("pipeline b sees pipeline a's accepted version: %v", err)
	}
	if got, err := s.AcceptedVersion(ctx, "a", "out", "2024-01-01"); err != nil || got.ID != va.ID {
		t.Errorf("AcceptedVersion(a) = %+v, %v", got, err)
	}
	if _, err := s.CompareAndSwapPointer(ctx, store.Swap{Pipeline: "b", Sink: "s", Artifact: "out", Interval: "2024-01-01",
		Version: va.ID, Token: va.Token}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("pipeline b published pipeline a's version: %v, want store.ErrConflict", err)
	}
	if res, err := s.CompareAndSwapPointer(ctx, store.Swap{Pipeline: "a", Sink: "s", Artifact: "out", Interval: "2024-01-01",
		Version: va.ID, Token: va.Token}); err != nil || res.Outcome != store.Won {
		t.Fatalf("swap = %+v, %v", res, err)
	}
	if _, err := s.Pointer(ctx, "b", "s", "out", "2024-01-01"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("pipeline b has pipeline a's pointer: %v", err)
	}
	if ps, err := s.Pointers(ctx, "b", "s"); err != nil || len(ps) != 0 {
		t.Errorf("Pointers(b) = %v, %v", ps, err)
	}
}

func testRunLease(t *testing.T, open single) {
	clock := newFakeClock()
	s := open(t, clock.Now)
	ctx := context.Background()
	nr := func(pid int, takeOver string) store.NewRun {
		return store.NewRun{Pipeline: "orders", Interval: "2024-01-01", CodeVersion: "1", PlanDigest: "sha256:p",
			Owner: store.RunOwner{Host: "h1", PID: pid}, Lease: time.Second, TakeOver: takeOver}
	}
	r1, err := s.CreateRun(ctx, nr(100, ""))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateRun(ctx, nr(200, ""))
	var busy *store.RunBusyError
	if !errors.As(err, &busy) || !errors.Is(err, store.ErrRunBusy) || busy.Run != r1.ID || busy.Owner.PID != 100 ||
		busy.Owner.Host != "h1" || !busy.Since.Equal(clock.Now()) {
		t.Fatalf("second run while the first holds the lease: %v (%+v)", err, busy)
	}
	// A run without a lease of its own is refused too.
	if _, err := s.CreateRun(ctx, store.NewRun{Pipeline: "orders", Interval: "2024-01-01"}); !errors.Is(err, store.ErrRunBusy) {
		t.Errorf("a lease-less run beside a live lease: %v", err)
	}
	// Another interval, another pipeline: not held.
	if _, err := s.CreateRun(ctx, store.NewRun{Pipeline: "orders", Interval: "2024-01-02", Lease: time.Second}); err != nil {
		t.Errorf("another interval: %v", err)
	}
	if _, err := s.CreateRun(ctx, store.NewRun{Pipeline: "other", Interval: "2024-01-01", Lease: time.Second}); err != nil {
		t.Errorf("another pipeline: %v", err)
	}
	clock.Advance(900 * time.Millisecond)
	if err := s.RenewRunLease(ctx, r1.ID, time.Second); err != nil {
		t.Fatal(err)
	}
	clock.Advance(900 * time.Millisecond)
	if _, err := s.CreateRun(ctx, nr(200, "")); !errors.Is(err, store.ErrRunBusy) {
		t.Fatalf("the renewed lease was taken: %v", err)
	}
	// Expired: taken over.
	clock.Advance(200 * time.Millisecond)
	r2, err := s.CreateRun(ctx, nr(200, ""))
	if err != nil {
		t.Fatalf("taking over an expired lease: %v", err)
	}
	if err := s.RenewRunLease(ctx, r1.ID, time.Second); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("the old holder renewed a lease taken over: %v", err)
	}
	// TakeOver of a named holder (its owner is known dead) takes a live
	// lease at once, only that holder's.
	if _, err := s.CreateRun(ctx, nr(300, r1.ID)); !errors.Is(err, store.ErrRunBusy) {
		t.Errorf("TakeOver of a run that no longer holds the lease: %v", err)
	}
	r3, err := s.CreateRun(ctx, nr(300, r2.ID))
	if err != nil {
		t.Fatalf("TakeOver of the holder: %v", err)
	}
	// Finishing releases the interval.
	if err := s.FinishRun(ctx, r3.ID, store.RunSucceeded); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateRun(ctx, nr(400, "")); err != nil {
		t.Errorf("a run after the holder finished: %v", err)
	}
}

func testStateIDAndRaiseTokens(t *testing.T, open single) {
	s := open(t, nil)
	ctx := context.Background()
	id, err := s.StateID(ctx)
	if err != nil || len(id) < 16 {
		t.Fatalf("StateID = %q, %v", id, err)
	}
	if again, _ := s.StateID(ctx); again != id {
		t.Errorf("StateID changed: %q, %q", id, again)
	}
	if other, _ := open(t, nil).StateID(ctx); other == id {
		t.Errorf("two stores share the id %q", id)
	}
	res := "orders@2024-01-01"
	if _, err := s.NextToken(ctx, res); err != nil {
		t.Fatal(err)
	}
	// A floor in an epoch this store never reached (another state's).
	floor := int64(7_000_000_123)
	if err := s.RaiseTokens(ctx, []string{res}, floor, "test"); err != nil {
		t.Fatal(err)
	}
	tok, err := s.NextToken(ctx, res)
	if err != nil || tok <= floor {
		t.Fatalf("token after raising to %d = %d, %v", floor, tok, err)
	}
	if err := s.RaiseTokens(ctx, []string{res}, 5, "lower"); err != nil {
		t.Fatal(err)
	}
	if next, err := s.NextToken(ctx, res); err != nil || next <= tok {
		t.Fatalf("a lower floor lowered the tokens: %d after %d, %v", next, tok, err)
	}
}

func testAttemptTransitions(t *testing.T, open single) {
	clock := newFakeClock()
	s := open(t, clock.Now)
	ctx := context.Background()
	r := newRun(t, s, "2024-01-01")
	q, err := s.StartAttempt(ctx, store.AttemptSpec{Run: r.ID, Task: "t", Resource: "orders@2024-01-01", Queued: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.FinishAttempt(ctx, q.AttemptRef, store.Outcome{State: store.AttemptSucceeded}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a queued attempt succeeded without running: %v", err)
	}
	if err := s.RenewLease(ctx, q.AttemptRef, q.Token, time.Second); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("renewing a queued attempt: %v", err)
	}
	if _, err := s.MarkRunning(ctx, q.AttemptRef, 1, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.RenewLease(ctx, q.AttemptRef, q.Token+1, time.Second); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("renewing with another token: %v", err)
	}
	clock.Advance(2 * time.Second)
	if got, err := s.MarkUnknown(ctx); err != nil || len(got) != 1 {
		t.Fatalf("MarkUnknown = %v, %v", got, err)
	}
	if _, err := s.MarkRunning(ctx, q.AttemptRef, 2, time.Second); !errors.Is(err, store.ErrConflict) {
		t.Errorf("an unknown attempt revived to running: %v", err)
	}
	if err := s.RenewLease(ctx, q.AttemptRef, q.Token, time.Second); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("an unknown attempt's lease renewed: %v", err)
	}
	if err := s.FinishAttempt(ctx, q.AttemptRef, store.Outcome{State: store.AttemptSucceeded}); err != nil {
		t.Errorf("an unknown attempt whose process came back cannot finish: %v", err)
	}
}
