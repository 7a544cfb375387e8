// Package storetest is the conformance suite of a state backend: one suite,
// with one fake clock, that every backend (runtime/store/sqlite,
// runtime/store/postgres) runs with one call of Run from its tests.
//
// It checks that the backend's store.Store keeps the guarantees the
// interface documents: run ids, tokens that only grow, attempt states and
// leases judged on the store's clock, accepted versions per interval,
// compare-and-swap outcomes, the event log, and an attempt's end with the
// starts it lets start (store.FinishAndStart: through the backend's
// store.Handoff where it has one); that it holds a pipeline's
// max_active_runs (NewRun.MaxActive) across handles; that its queue.Queue
// keeps what that interface documents and the failover model decides: a
// submitted DAG advances as tasks finish, the last task to finish ends the
// run, a failure spreads "not run" downstream, a graceful hand-back counts
// nowhere, an expired claim is swept to the model as a lost lease, a run no
// live worker may go on with says it waits for a worker, two claimers never
// get the same task, and a worker's name live in another process is
// refused; and that the optional capabilities it has (queue.AttemptStarter,
// store.EventTailer) keep theirs.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// Handle is one connection to a shared state: its store and the workers'
// queue on it, one value (as runtime/store/backend opens it), on which the
// optional capabilities are found by a type assertion.
type Handle interface {
	store.Store
	queue.Queue
}

// Opener makes a new, empty shared state whose clock (the one leases are
// judged on too) is clock (time.Now when nil), and returns how to open
// handles on it: each call opens another handle on the same state, as
// another process would, closed when the test ends.
type Opener func(t *testing.T, clock store.Clock) func(t *testing.T) Handle

// Run runs every check of the suite as a subtest: the store's, the run
// slots', the queue's and those of the optional capabilities the backend
// has (the others are skipped, saying so).
func Run(t *testing.T, open Opener) {
	t.Run("Store", func(t *testing.T) {
		runStore(t, func(t *testing.T, clock store.Clock) store.Store { return open(t, clock)(t) })
	})
	t.Run("RunSlots", func(t *testing.T) { runSlots(t, open) })
	t.Run("Queue", func(t *testing.T) { runQueue(t, open) })
	t.Run("Capabilities", func(t *testing.T) { runCapabilities(t, open) })
}

// single opens a new, empty state and one handle on it, as the store's
// checks need: its clock is clock (time.Now when nil).
type single func(t *testing.T, clock store.Clock) store.Store

// runStore runs the store's checks (store.Store) as subtests.
func runStore(t *testing.T, open single) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, single)
	}{
		{"RunIDsCountPerInterval", testRunIDsCountPerInterval},
		{"AttemptsLeasesAndUnknown", testAttemptsLeasesAndUnknown},
		{"VersionsAcceptedPerInterval", testVersionsAcceptedPerInterval},
		{"CompareAndSwapPointer", testCompareAndSwapPointer},
		{"AbandonRun", testAbandonRun},
		{"ConcurrentTokens", testConcurrentTokens},
		{"ConcurrentSwaps", testConcurrentSwaps},
		{"PointersGeneration", testPointersGeneration},
		{"FenceAtGrant", testFenceAtGrant},
		{"PipelineScope", testPipelineScope},
		{"RunLease", testRunLease},
		{"RunLeases", testRunLeases},
		{"StateIDAndRaiseTokens", testStateIDAndRaiseTokens},
		{"AttemptTransitions", testAttemptTransitions},
		{"ProcessRecorded", testProcessRecorded},
		{"ResolveAttempt", testResolveAttempt},
		{"FinishRecordsProcess", testFinishRecordsProcess},
		{"FinishUnknown", testFinishUnknown},
		{"FinishAssumingWas", testFinishAssumingWas},
		{"FinishAfterLostStart", testFinishAfterLostStart},
		{"FinishAndStart", testFinishAndStart},
		{"TaskAttempts", testTaskAttempts},
		{"CancelRun", testCancelRun},
		{"TakeRetry", testTakeRetry},
		{"Collections", testCollections},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
	}
}

// fakeClock is the suite's clock, which a check moves by hand: the store's
// clock, and the one its leases are judged on.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2024, 1, 2, 3, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// queuedSpec is the spec of task's attempt in run, taken queued (as a run
// takes it before the task waits for a slot) in the orders pipeline's
// interval 2024-01-01 on host h1.
func queuedSpec(run, task string) store.AttemptSpec {
	return store.AttemptSpec{Run: run, Task: task, Resource: store.FenceResource("orders", "2024-01-01"),
		Host: "h1", Boot: "b1", Lease: time.Minute, Queued: true}
}

func newRun(t testing.TB, s store.Store, interval string) store.Run {
	t.Helper()
	r, err := s.CreateRun(context.Background(), store.NewRun{
		Pipeline: "orders", Interval: interval,
		IntervalStart: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		IntervalEnd:   time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC),
		CodeVersion:   "2024.06.1", PlanDigest: "sha256:plan",
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testRunIDsCountPerInterval(t *testing.T, open single) {
	s := open(t, nil)
	ctx := context.Background()
	a := newRun(t, s, "2024-01-01")
	b := newRun(t, s, "2024-01-01")
	c := newRun(t, s, "2024-01-02")
	if a.ID != "orders/2024-01-01/r1" || b.ID != "orders/2024-01-01/r2" || c.ID != "orders/2024-01-02/r1" {
		t.Fatalf("run ids %s %s %s", a.ID, b.ID, c.ID)
	}
	runs, err := s.ListRuns(ctx, store.RunFilter{Interval: "2024-01-01"})
	if err != nil || len(runs) != 2 || runs[0].ID != a.ID || runs[1].ID != b.ID {
		t.Fatalf("ListRuns = %v, %v", runs, err)
	}
	if err := s.FinishRun(ctx, a.ID, store.RunFailed); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, a.ID, store.RunSucceeded); !errors.Is(err, store.ErrConflict) {
		t.Errorf("finishing a failed run as succeeded: %v, want store.ErrConflict", err)
	}
	if _, err := s.StartAttempt(ctx, store.AttemptSpec{Run: a.ID, Task: "t", Resource: "r"}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("attempt in a finished run: %v, want store.ErrConflict", err)
	}
	if _, err := s.GetRun(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetRun(nope) = %v, want store.ErrNotFound", err)
	}
	// A run's task digests come back from GetRun as they went in, and a
	// run made without them has none.
	digests := map[string]string{"extract": "0123456789abcdef", "load": "fedcba9876543210"}
	d, err := s.CreateRun(ctx, store.NewRun{Pipeline: "orders", Interval: "2024-01-03", CodeVersion: "1", PlanDigest: "sha256:p", TaskDigests: digests})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetRun(ctx, d.ID); err != nil || !maps.Equal(got.TaskDigests, digests) {
		t.Errorf("GetRun(%s).TaskDigests = %v, %v; want %v", d.ID, got.TaskDigests, err, digests)
	}
	if got, err := s.GetRun(ctx, a.ID); err != nil || got.TaskDigests != nil {
		t.Errorf("GetRun(%s).TaskDigests = %v, %v; want none", a.ID, got.TaskDigests, err)
	}
}

func testAttemptsLeasesAndUnknown(t *testing.T, open single) {
	clock := newFakeClock()
	s := open(t, clock.Now)
	ctx := context.Background()
	r := newRun(t, s, "2024-01-01")
	res := "orders@2024-01-01"

	a1, err := s.StartAttempt(ctx, store.AttemptSpec{Run: r.ID, Task: "extract", Resource: res, Lease: time.Second, Worker: "w1", PID: 42})
	if err != nil {
		t.Fatal(err)
	}
	if a1.Number != 1 || a1.Token <= 0 || a1.State != store.AttemptRunning || !a1.LeaseExpiry.Equal(clock.Now().Add(time.Second)) {
		t.Fatalf("first attempt = %+v", a1)
	}
	clock.Advance(900 * time.Millisecond)
	if err := s.RenewLease(ctx, a1.AttemptRef, a1.Token, 0); err != nil {
		t.Fatal(err)
	}
	clock.Advance(900 * time.Millisecond)
	if got, err := s.MarkUnknown(ctx); err != nil || len(got) != 0 {
		t.Fatalf("renewed lease reported expired: %v, %v", got, err)
	}
	clock.Advance(100 * time.Millisecond) // exactly at expiry: expired
	got, err := s.MarkUnknown(ctx)
	if err != nil || len(got) != 1 || got[0].AttemptRef != a1.AttemptRef || got[0].State != store.AttemptUnknown {
		t.Fatalf("MarkUnknown = %+v, %v", got, err)
	}
	if err := s.RenewLease(ctx, a1.AttemptRef, a1.Token, time.Second); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("renewing an unknown attempt: %v, want store.ErrLeaseLost", err)
	}

	a2, err := s.StartAttempt(ctx, store.AttemptSpec{Run: r.ID, Task: "extract", Resource: res, Queued: true})
	if err != nil {
		t.Fatal(err)
	}
	if a2.Number != 2 || a2.Token <= a1.Token || a2.State != store.AttemptQueued || !a2.Started.IsZero() {
		t.Fatalf("second attempt = %+v", a2)
	}
	if err := s.RenewLease(ctx, a2.AttemptRef, a2.Token, time.Second); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("renewing a queued attempt: %v, want store.ErrLeaseLost", err)
	}
	a2, err = s.MarkRunning(ctx, a2.AttemptRef, 43, time.Minute)
	if err != nil || a2.State != store.AttemptRunning || a2.PID != 43 || a2.Started.IsZero() {
		t.Fatalf("MarkRunning = %+v, %v", a2, err)
	}
	if err := s.RenewLease(ctx, a2.AttemptRef, a1.Token, time.Second); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("renewing with another attempt's token: %v, want store.ErrLeaseLost", err)
	}

	ok := store.Outcome{State: store.AttemptSucceeded}
	if err := s.FinishAttempt(ctx, a2.AttemptRef, ok); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishAttempt(ctx, a2.AttemptRef, ok); err != nil {
		t.Errorf("repeating the same outcome: %v", err)
	}
	if err := s.FinishAttempt(ctx, a2.AttemptRef, store.Outcome{State: store.AttemptFailed, Class: "schema", ExitCode: 65}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("changing a finished outcome: %v, want store.ErrConflict", err)
	}
	// The unknown attempt's process came back and failed: recorded as it is.
	fail := store.Outcome{State: store.AttemptFailed, Class: "transient", ExitCode: 75, ErrorTail: "connection reset"}
	if err := s.FinishAttempt(ctx, a1.AttemptRef, fail); err != nil {
		t.Fatal(err)
	}
	atts, err := s.Attempts(ctx, r.ID)
	if err != nil || len(atts) != 2 {
		t.Fatalf("Attempts = %v, %v", atts, err)
	}
	if a := atts[0]; a.State != store.AttemptFailed || a.Class != "transient" || a.ExitCode != 75 || a.ErrorTail != "connection reset" ||
		a.Worker != "w1" || a.PID != 42 || a.Ended.IsZero() || !a.LeaseExpiry.IsZero() {
		t.Errorf("attempt 1 = %+v", a)
	}

	evs, err := s.Events(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for i, e := range evs {
		if i > 0 && e.Seq <= evs[i-1].Seq {
			t.Errorf("event seq %d after %d", e.Seq, evs[i-1].Seq)
		}
		kinds = append(kinds, e.Kind)
	}
	want := "run.created attempt.started attempt.unknown attempt.started attempt.running attempt.finished attempt.finished"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
}

// publishable records an accepted version for a fresh attempt and returns it.
func publishable(t testing.TB, s store.Store, run, task, artifact, interval, digest string) store.Version {
	t.Helper()
	ctx := context.Background()
	a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run, Task: task, Resource: "orders@" + interval})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.RecordVersion(ctx, store.Version{Artifact: artifact, Interval: interval, Digest: digest, Run: run, Task: task,
		Attempt: a.Number, Location: "orders/orders_clean/00"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AcceptVersion(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	v.State = store.VersionAccepted
	return v
}

func testVersionsAcceptedPerInterval(t *testing.T, open single) {
	s := open(t, nil)
	ctx := context.Background()
	r := newRun(t, s, "2024-01-01")
	v1 := publishable(t, s, r.ID, "clean", "orders_clean", "2024-01-01", "sha256:aa")
	if v1.Token <= 0 || v1.CodeVersion != "2024.06.1" || v1.Run != r.ID {
		t.Errorf("version = %+v", v1)
	}
	again, err := s.RecordVersion(ctx, store.Version{Artifact: v1.Artifact, Interval: v1.Interval, Digest: v1.Digest, Run: r.ID, Task: "clean", Attempt: 1})
	if err != nil || again.ID != v1.ID || again.State != store.VersionAccepted {
		t.Errorf("recording the same version again = %+v, %v", again, err)
	}
	if _, err := s.AcceptedVersion(ctx, "orders", "orders_clean", "2024-01-02"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another interval's accepted version satisfied 2024-01-02: %v", err)
	}
	v2 := publishable(t, s, r.ID, "clean", "orders_clean", "2024-01-01", "sha256:bb")
	got, err := s.AcceptedVersion(ctx, "orders", "orders_clean", "2024-01-01")
	if err != nil || got.ID != v2.ID {
		t.Errorf("AcceptedVersion = %+v, %v; want the newest attempt's %d", got, err, v2.ID)
	}
	a3, err := s.StartAttempt(ctx, store.AttemptSpec{Run: r.ID, Task: "clean", Resource: "orders@2024-01-01"})
	if err != nil {
		t.Fatal(err)
	}
	v3, err := s.RecordVersion(ctx, store.Version{Artifact: "orders_clean", Interval: "2024-01-01", Digest: "sha256:cc", Run: r.ID, Task: "clean", Attempt: a3.Number})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RejectVersion(ctx, v3.ID, "row_count_min: 0 rows, want at least 1"); err != nil {
		t.Fatal(err)
	}
	if err := s.AcceptVersion(ctx, v3.ID); !errors.Is(err, store.ErrConflict) {
		t.Errorf("accepting a rejected version: %v, want store.ErrConflict", err)
	}
	if got, _ := s.AcceptedVersion(ctx, "orders", "orders_clean", "2024-01-01"); got.ID != v2.ID {
		t.Errorf("a rejected version became the accepted one: %+v", got)
	}
	if _, err := s.RecordVersion(ctx, store.Version{Artifact: "x", Interval: "i", Digest: "sha256:aa", Run: r.ID, Task: "clean", Attempt: 99}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("version of a missing attempt: %v, want store.ErrNotFound", err)
	}
	// What one attempt recorded, in whatever state, and only that.
	for _, want := range []store.Version{v1, v2, v3} {
		ref := store.AttemptRef{Run: want.Run, Task: want.Task, Number: want.Attempt}
		got, err := s.AttemptVersion(ctx, ref, "orders_clean", "2024-01-01")
		if err != nil || got.ID != want.ID || got.Digest != want.Digest {
			t.Errorf("AttemptVersion(%s) = %+v, %v; want version %d", ref, got, err, want.ID)
		}
		if _, err := s.AttemptVersion(ctx, ref, "orders_clean", "2024-01-02"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("AttemptVersion(%s) of another interval: %v, want store.ErrNotFound", ref, err)
		}
		if _, err := s.AttemptVersion(ctx, ref, "other", "2024-01-01"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("AttemptVersion(%s) of another artifact: %v, want store.ErrNotFound", ref, err)
		}
	}
	if got, err := s.AttemptVersion(ctx, store.AttemptRef{Run: r.ID, Task: "clean", Number: a3.Number}, "orders_clean", "2024-01-01"); err != nil || got.State != store.VersionRejected {
		t.Errorf("AttemptVersion of a rejected version = %+v, %v", got, err)
	}
	// A rejected version audited again (a check edited since): staged
	// again, twice a no-op, then accepted; an accepted one is not reopened.
	for range 2 {
		if err := s.ReopenVersion(ctx, v3.ID, "check rows edited since"); err != nil {
			t.Fatalf("reopening a rejected version: %v", err)
		}
	}
	if got, err := s.GetVersion(ctx, v3.ID); err != nil || got.State != store.VersionStaged || got.Reason != "" {
		t.Errorf("a reopened version = %+v, %v; want staged, no reason", got, err)
	}
	if err := s.AcceptVersion(ctx, v3.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.AcceptedVersion(ctx, "orders", "orders_clean", "2024-01-01"); got.ID != v3.ID {
		t.Errorf("the reopened version, accepted, is not the accepted one: %+v", got)
	}
	if err := s.ReopenVersion(ctx, v2.ID, "x"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("reopening an accepted version: %v, want store.ErrConflict", err)
	}
	evs, err := s.Events(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	reopened := 0
	for _, e := range evs {
		if e.Kind == store.EventVersionReopened && strings.Contains(string(e.Payload), "check rows edited since") {
			reopened++
		}
	}
	if reopened != 1 {
		t.Errorf("%d version.reopened events with the reason, want 1 (a second reopening is a no-op)", reopened)
	}
}

func testCompareAndSwapPointer(t *testing.T, open single) {
	s := open(t, nil)
	ctx := context.Background()
	r := newRun(t, s, "2024-01-01")
	v1 := publishable(t, s, r.ID, "clean", "orders_clean", "2024-01-01", "sha256:aa")
	v2 := publishable(t, s, r.ID, "clean", "orders_clean", "2024-01-01", "sha256:bb")
	swap := func(v store.Version, tok int64, unfenced bool) (store.CASResult, error) {
		return s.CompareAndSwapPointer(ctx, store.Swap{Pipeline: "orders", Sink: "warehouse", Artifact: "orders_clean", Interval: "2024-01-01",
			Version: v.ID, Token: tok, Unfenced: unfenced})
	}

	if res, err := swap(v2, v2.Token, false); err != nil || res.Outcome != store.Won || res.Previous.Version != 0 {
		t.Fatalf("first swap = %+v, %v", res, err)
	}
	if res, err := swap(v2, v2.Token, false); err != nil || res.Outcome != store.Idempotent {
		t.Fatalf("same token and version again = %+v, %v", res, err)
	}
	res, err := swap(v1, v1.Token, false)
	if err != nil || res.Outcome != store.Fenced || res.Pointer.Version != v2.ID || res.Pointer.Token != v2.Token {
		t.Fatalf("stale token = %+v, %v", res, err)
	}
	if _, err := swap(v1, v2.Token, false); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a token that is not the version's own: %v, want store.ErrConflict", err)
	}
	p, err := s.Pointer(ctx, "orders", "warehouse", "orders_clean", "2024-01-01")
	if err != nil || p.Version != v2.ID || p.Token != v2.Token || p.Unfenced {
		t.Fatalf("pointer = %+v, %v", p, err)
	}
	// fencing = "none": the older version wins anyway, and says so.
	res, err = swap(v1, v1.Token, true)
	if err != nil || res.Outcome != store.Won || !res.Pointer.Unfenced || res.Previous.Version != v2.ID {
		t.Fatalf("unfenced swap = %+v, %v", res, err)
	}
	staged, err := s.StartAttempt(ctx, store.AttemptSpec{Run: r.ID, Task: "clean", Resource: "orders@2024-01-01"})
	if err != nil {
		t.Fatal(err)
	}
	sv, err := s.RecordVersion(ctx, store.Version{Artifact: "orders_clean", Interval: "2024-01-01", Digest: "sha256:dd", Run: r.ID, Task: "clean", Attempt: staged.Number})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := swap(sv, sv.Token, false); !errors.Is(err, store.ErrConflict) {
		t.Errorf("publishing a version that is not accepted: %v, want store.ErrConflict", err)
	}
	other := publishable(t, s, r.ID, "clean", "orders_clean", "2024-01-02", "sha256:ee")
	if _, err := swap(other, other.Token, false); !errors.Is(err, store.ErrConflict) {
		t.Errorf("publishing another interval's version: %v, want store.ErrConflict", err)
	}

	evs, err := s.Events(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var publishes []string
	for _, e := range evs {
		if strings.HasPrefix(e.Kind, "publish.") {
			publishes = append(publishes, e.Kind)
		}
	}
	if got, want := strings.Join(publishes, " "), "publish.won publish.idempotent publish.fenced publish.won"; got != want {
		t.Errorf("publish events %q, want %q", got, want)
	}
	ps, err := s.Pointers(ctx, "orders", "warehouse")
	if err != nil || len(ps) != 1 {
		t.Fatalf("Pointers = %v, %v", ps, err)
	}
	// The pointer's version, as GetVersion reads it; none of another sink.
	want, err := s.GetVersion(ctx, ps[0].Version)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.PointedVersions(ctx, "orders", "warehouse")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[int64]store.Version{want.ID: want}, got); diff != "" {
		t.Errorf("PointedVersions differs from GetVersion of the pointer (-want +got):\n%s", diff)
	}
	if got, err := s.PointedVersions(ctx, "orders", "lake"); err != nil || len(got) != 0 {
		t.Errorf("PointedVersions of a sink with no pointers = %v, %v", got, err)
	}
}

func testAbandonRun(t *testing.T, open single) {
	s := open(t, nil)
	ctx := context.Background()
	crashed := newRun(t, s, "2024-01-01")
	res := store.FenceResource("orders", "2024-01-01")
	done, err := s.StartAttempt(ctx, store.AttemptSpec{Run: crashed.ID, Task: "extract", Resource: res})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.FinishAttempt(ctx, done.AttemptRef, store.Outcome{State: store.AttemptSucceeded}); err != nil {
		t.Fatal(err)
	}
	running, err := s.StartAttempt(ctx, store.AttemptSpec{Run: crashed.ID, Task: "clean", Resource: res}) // no lease
	if err != nil {
		t.Fatal(err)
	}
	queued, err := s.StartAttempt(ctx, store.AttemptSpec{Run: crashed.ID, Task: "load", Resource: res, Queued: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.AbandonRun(ctx, crashed.ID, "pipec died; rerun orders/2024-01-01/r2")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].AttemptRef != running.AttemptRef || got[1].AttemptRef != queued.AttemptRef || got[0].State != store.AttemptUnknown {
		t.Fatalf("AbandonRun = %+v", got)
	}
	if r, _ := s.GetRun(ctx, crashed.ID); r.State != store.RunFailed || r.Finished.IsZero() {
		t.Errorf("abandoned run = %+v", r)
	}
	if a, _ := s.GetAttempt(ctx, done.AttemptRef); a.State != store.AttemptSucceeded {
		t.Errorf("a finished attempt changed: %+v", a)
	}
	rerun := newRun(t, s, "2024-01-01")
	next, err := s.StartAttempt(ctx, store.AttemptSpec{Run: rerun.ID, Task: "clean", Resource: res})
	if err != nil || next.Token <= queued.Token {
		t.Errorf("rerun attempt token %d, %v; want above %d", next.Token, err, queued.Token)
	}
	evs, _ := s.Events(ctx, crashed.ID)
	if last := evs[len(evs)-1]; last.Kind != store.EventRunAbandoned || !strings.Contains(string(last.Payload), "pipec died") {
		t.Errorf("last event = %+v", last)
	}
	if _, err := s.AbandonRun(ctx, "nope", ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AbandonRun(nope) = %v", err)
	}
}

// testConcurrentTokens grants tokens of one resource from many goroutines:
// all distinct, and each goroutine's strictly increasing.
func testConcurrentTokens(t *testing.T, open single) {
	s := open(t, nil)
	ctx := context.Background()
	const workers, each = 8, 50
	var wg sync.WaitGroup
	got := make([][]int64, workers)
	errs := make([]error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				tok, err := s.NextToken(ctx, "shared")
				if err != nil {
					errs[w] = err
					return
				}
				got[w] = append(got[w], tok)
			}
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for w := range got {
		if errs[w] != nil {
			t.Fatal(errs[w])
		}
		for i, tok := range got[w] {
			if i > 0 && tok <= got[w][i-1] {
				t.Errorf("worker %d: token %d after %d", w, tok, got[w][i-1])
			}
			if seen[tok] {
				t.Errorf("token %d granted twice", tok)
			}
			seen[tok] = true
		}
	}
	if len(seen) != workers*each {
		t.Errorf("%d tokens, want %d", len(seen), workers*each)
	}
}

// testConcurrentSwaps races 8 swaps from one base (Expect) per round: exactly
// one wins, and the pointer's token strictly increases.
func testConcurrentSwaps(t *testing.T, open single) {
	s := open(t, nil)
	ctx := context.Background()
	r := newRun(t, s, "2024-01-01")
	var last int64
	for round := 0; round < 20; round++ {
		vs := make([]store.Version, 8)
		for i := range vs {
			vs[i] = publishable(t, s, r.ID, fmt.Sprintf("p%d", i), "orders_clean", "2024-01-01", fmt.Sprintf("sha256:%02d%02d", round, i))
		}
		base := last
		var wg sync.WaitGroup
		outcomes := make([]store.CASOutcome, len(vs))
		errs := make([]error, len(vs))
		for i, v := range vs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := s.CompareAndSwapPointer(ctx, store.Swap{Pipeline: "orders", Sink: "warehouse", Artifact: v.Artifact, Interval: v.Interval,
					Version: v.ID, Token: v.Token, Expect: &base})
				outcomes[i], errs[i] = res.Outcome, err
			}()
		}
		wg.Wait()
		won := 0
		for i := range vs {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			switch outcomes[i] {
			case store.Won:
				won++
			case store.Conflict, store.Fenced:
			default:
				t.Fatalf("round %d: outcome %s", round, outcomes[i])
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d winners, want 1", round, won)
		}
		p, err := s.Pointer(ctx, "orders", "warehouse", "orders_clean", "2024-01-01")
		if err != nil {
			t.Fatal(err)
		}
		if p.Token <= last {
			t.Fatalf("round %d: pointer token %d after %d", round, p.Token, last)
		}
		last = p.Token
	}
}

// Every swap that moves a pointer of a sink takes the sink's next
// generation, and only such a swap: a reader that saw the sink at one
// generation can tell from that one row whether any pointer moved since.
func testPointersGeneration(t *testing.T, open single) {
	s := open(t, nil)
	ctx := context.Background()
	r := newRun(t, s, "2024-01-01")
	gen := func(pipeline, sink string) int64 {
		t.Helper()
		g, err := s.PointersGeneration(ctx, pipeline, sink)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	swap := func(v store.Version, unfenced bool) store.CASResult {
		t.Helper()
		res, err := s.CompareAndSwapPointer(ctx, store.Swap{Pipeline: "orders", Sink: "warehouse", Artifact: v.Artifact,
			Interval: v.Interval, Version: v.ID, Token: v.Token, Unfenced: unfenced})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if g := gen("orders", "warehouse"); g != 0 {
		t.Fatalf("a sink never swapped is at generation %d, want 0", g)
	}
	v1 := publishable(t, s, r.ID, "clean", "orders_clean", "2024-01-01", "sha256:aa")
	v2 := publishable(t, s, r.ID, "clean", "orders_clean", "2024-01-01", "sha256:bb")
	for i, c := range []struct {
		v        store.Version
		unfenced bool
		outcome  store.CASOutcome
		gen      int64 // the swap's, 0 when it moved nothing
		after    int64
	}{
		{v2, false, store.Won, 1, 1},
		{v2, false, store.Idempotent, 0, 1},
		{v1, false, store.Fenced, 0, 1},
		{v1, true, store.Won, 2, 2}, // fencing = "none": back to an older version, a move all the same
	} {
		res := swap(c.v, c.unfenced)
		if res.Outcome != c.outcome || res.Generation != c.gen {
			t.Errorf("swap %d = %s at generation %d, want %s at %d", i, res.Outcome, res.Generation, c.outcome, c.gen)
		}
		if g := gen("orders", "warehouse"); g != c.after {
			t.Errorf("after swap %d the sink is at generation %d, want %d", i, g, c.after)
		}
	}
	if g := gen("orders", "lake"); g != 0 {
		t.Errorf("another sink is at generation %d, want 0", g)
	}
	if g := gen("billing", "warehouse"); g != 0 {
		t.Errorf("another pipeline's sink of the same name is at generation %d, want 0", g)
	}

	// Swaps of distinct intervals at once: each takes a generation of its
	// own, and the sink ends at the last.
	const n = 8
	vs := make([]store.Version, n)
	for i := range vs {
		iv := fmt.Sprintf("2024-02-%02d", i+1)
		vs[i] = publishable(t, s, newRun(t, s, iv).ID, "clean", "orders_clean", iv, "sha256:cc")
	}
	gens := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, v := range vs {
		wg.Go(func() {
			var res store.CASResult
			res, errs[i] = s.CompareAndSwapPointer(ctx, store.Swap{Pipeline: "orders", Sink: "warehouse", Artifact: v.Artifact,
				Interval: v.Interval, Version: v.ID, Token: v.Token})
			gens[i] = res.Generation
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	slices.Sort(gens)
	for i, g := range gens {
		if g != int64(3+i) {
			t.Fatalf("concurrent swaps took generations %v, want 3 to %d", gens, 2+n)
		}
	}
	if g := gen("orders", "warehouse"); g != 2+n {
		t.Errorf("after the concurrent swaps the sink is at generation %d, want %d", g, 2+n)
	}
}

// An attempt whose process ended without showing whether its effect
// happened is recorded unknown; recording unknown again is a no-op, and a
// succeeded or failed attempt cannot become unknown.
func testFinishUnknown(t *testing.T, open single) {
	s := open(t, nil)
	ctx := context.Background()
	r := newRun(t, s, "2024-01-01")
	a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: r.ID, Task: "charge", Resource: "orders@2024-01-01", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	o := store.Outcome{State: store.AttemptUnknown, Class: "killed", ExitCode: -1, ErrorTail: "interrupted"}
	if err := s.FinishAttempt(ctx, a.AttemptRef, o); err != nil {
		t.Fatalf("running -> unknown: %v", err)
	}
	if got, _ := s.GetAttempt(ctx, a.AttemptRef); got.State != store.AttemptUnknown {
		t.Fatalf("attempt is %s, want unknown", got.State)
	}
	if err := s.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptUnknown, Class: "lease_expired"}); err != nil {
		t.Errorf("unknown -> unknown again: %v, want a no-op", err)
	}
	b, err := s.StartAttempt(ctx, store.AttemptSpec{Run: r.ID, Task: "charge", Resource: "orders@2024-01-01", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.FinishAttempt(ctx, b.AttemptRef, store.Outcome{State: store.AttemptSucceeded}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishAttempt(ctx, b.AttemptRef, o); !errors.Is(err, store.ErrConflict) {
		t.Errorf("succeeded -> unknown: %v, want store.ErrConflict", err)
	}
	if err := s.FinishAttempt(ctx, b.AttemptRef, store.Outcome{State: store.AttemptRunning}); err == nil {
		t.Errorf("finishing as running was accepted")
	}
}

// TaskAttempts returns one task's attempts across the runs of an interval,
// by token, and nothing of other tasks or intervals.
func testTaskAttempts(t *testing.T, open single) {
	s := open(t, nil)
	ctx := context.Background()
	r1 := newRun(t, s, "2024-01-01")
	res := "orders@2024-01-01"
	start := func(run, task, resource string) store.Attempt {
		a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run, Task: task, Resource: resource, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a1 := start(r1.ID, "charge", res)
	start(r1.ID, "other", res)
	if err := s.FinishRun(ctx, r1.ID, store.RunFailed); err != nil {
		t.Fatal(err)
	}
	r2 := newRun(t, s, "2024-01-01")
	a2 := start(r2.ID, "charge", res)
	r3 := newRun(t, s, "2024-01-02")
	start(r3.ID, "charge", "orders@2024-01-02")
	got, err := s.TaskAttempts(ctx, res, "charge")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].AttemptRef != a1.AttemptRef || got[1].AttemptRef != a2.AttemptRef {
		t.Fatalf("TaskAttempts = %+v, want %s then %s", got, a1.AttemptRef, a2.AttemptRef)
	}
	if none, err := s.TaskAttempts(ctx, res, "nope"); err != nil || len(none) != 0 {
		t.Errorf("TaskAttempts of a task that never ran = %v, %v", none, err)
	}
}

// A cancelled run is over at once, says who and why, holds its interval no
// more, and cannot be cancelled or finished again.
func testCancelRun(t *testing.T, open single) {
	s := open(t, nil)
	ctx := context.Background()
	r, err := s.CreateRun(ctx, store.NewRun{Pipeline: "orders", Interval: "2024-01-01", Lease: time.Minute,
		Owner: store.RunOwner{Host: "h", PID: 1}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.CancelRun(ctx, r.ID, "wrong input", "ann@host")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.RunCancelled || got.Cancelled != "by ann@host: wrong input" || got.Finished.IsZero() {
		t.Fatalf("cancelled run = %+v", got)
	}
	if err := s.RenewRunLease(ctx, r.ID, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("renewing a cancelled run's lease: %v, want store.ErrLeaseLost", err)
	}
	if _, err := s.CancelRun(ctx, r.ID, "again", "bob"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("cancelling it again: %v, want store.ErrConflict", err)
	}
	if err := s.FinishRun(ctx, r.ID, store.RunSucceeded); !errors.Is(err, store.ErrConflict) {
		t.Errorf("finishing a cancelled run as succeeded: %v, want store.ErrConflict", err)
	}
	if _, err := s.CancelRun(ctx, "orders/2024-01-01/r9", "x", "y"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cancelling a run that does not exist: %v, want store.ErrNotFound", err)
	}
	runs, err := s.ListRuns(ctx, store.RunFilter{})
	if err != nil || len(runs) != 1 || runs[0].State != store.RunCancelled {
		t.Fatalf("ListRuns = %+v, %v", runs, err)
	}
	next, err := s.CreateRun(ctx, store.NewRun{Pipeline: "orders", Interval: "2024-01-01", Lease: time.Minute,
		Owner: store.RunOwner{Host: "h", PID: 2}})
	if err != nil || next.ID != "orders/2024-01-01/r2" {
		t.Fatalf("the next run of the interval: %+v, %v", next, err)
	}
}

// testTakeRetry: a run's retries are counted against the budget of its
// first attempts so far, whoever takes them; racing takers never exceed
// it; a run of its own has a count of its own.
func testTakeRetry(t *testing.T, open single) {
	s := open(t, nil)
	ctx := context.Background()
	newRun := func(interval string) store.Run {
		r, err := s.CreateRun(ctx, store.NewRun{Pipeline: "orders", Interval: interval, Owner: store.RunOwner{Host: "h", PID: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r, other := newRun("2024-01-01"), newRun("2024-01-02")
	res := store.FenceResource("orders", "2024-01-01")
	start := func(task string) {
		if _, err := s.StartAttempt(ctx, store.AttemptSpec{Run: r.ID, Task: task, Resource: res}); err != nil {
			t.Fatal(err)
		}
	}
	// One retry per two tasks started, at least one.
	allowed := func(first int) int { return max(1, first/2) }
	take := func(run string) store.RetryCount {
		t.Helper()
		c, err := s.TakeRetry(ctx, run, allowed)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := take(r.ID); c != (store.RetryCount{First: 0, Used: 1, Taken: true}) {
		t.Fatalf("first take = %+v", c)
	}
	if c := take(r.ID); c != (store.RetryCount{First: 0, Used: 1}) {
		t.Fatalf("take over the minimum = %+v", c)
	}
	start("a")
	start("a") // a second attempt of one task is not a first attempt
	start("b")
	start("c")
	start("d")
	if c := take(r.ID); c != (store.RetryCount{First: 4, Used: 2, Taken: true}) {
		t.Fatalf("take with four tasks started = %+v", c)
	}
	if c := take(other.ID); c != (store.RetryCount{First: 0, Used: 1, Taken: true}) {
		t.Fatalf("another run's take = %+v", c)
	}
	for _, task := range []string{"e", "f", "g", "h", "i", "j", "k", "l"} {
		start(task)
	}
	// 12 tasks: 6 allowed, 2 used; 8 racing takers take exactly 4.
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.TakeRetry(ctx, r.ID, allowed)
			if err != nil {
				t.Error(err)
				return
			}
			if c.Taken {
				mu.Lock()
				taken++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if taken != 4 {
		t.Errorf("racing takers took %d retries, want 4", taken)
	}
	if c := take(r.ID); c != (store.RetryCount{First: 12, Used: 6}) {
		t.Errorf("take after the race = %+v", c)
	}
	if _, err := s.TakeRetry(ctx, "orders/2024-01-09/r1", allowed); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a run that does not exist: %v, want store.ErrNotFound", err)
	}
}
