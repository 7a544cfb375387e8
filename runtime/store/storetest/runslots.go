package storetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// runSlots checks NewRun.MaxActive, the pipeline's max_active_runs held by
// the store: CreateRun and a queue's Submit refuse a run beyond it with a
// *RunSlotsError naming the runs in progress; a finished run, an expired
// lease and a run taken over free their slot; a run handed to workers
// holds one; and callers on separate handles creating runs at once never
// exceed it together.
func runSlots(t *testing.T, open Opener) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"RefusedBeyondMaxActive", testRunSlotsRefused},
		{"SubmittedRunsHoldSlots", testRunSlotsSubmitted},
		{"ConcurrentHandles", testRunSlotsConcurrent},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
	}
}

// slotRun is a NewRun of pipeline p for a day of January 2024, held by
// pid under a lease, counting max run slots.
func slotRun(p string, day, pid, max int, lease time.Duration) store.NewRun {
	start := time.Date(2024, 1, day, 0, 0, 0, 0, time.UTC)
	return store.NewRun{Pipeline: p, Interval: start.Format(time.DateOnly), IntervalStart: start, IntervalEnd: start.AddDate(0, 0, 1),
		CodeVersion: "1", PlanDigest: "sha256:p", Owner: store.RunOwner{Host: "h1", PID: pid}, Lease: lease, MaxActive: max}
}

// refusedSlots is the *RunSlotsError of err, failing the test otherwise.
func refusedSlots(t *testing.T, err error, what string) *store.RunSlotsError {
	t.Helper()
	var e *store.RunSlotsError
	if !errors.As(err, &e) || !errors.Is(err, store.ErrNoRunSlot) || errors.Is(err, store.ErrRunBusy) {
		t.Fatalf("%s: err = %v, want a *RunSlotsError (ErrNoRunSlot)", what, err)
	}
	return e
}

func testRunSlotsRefused(t *testing.T, open Opener) {
	clock := newFakeClock()
	s := open(t, clock.Now)(t)
	ctx := context.Background()
	create := func(nr store.NewRun) store.Run {
		t.Helper()
		r, err := s.CreateRun(ctx, nr)
		if err != nil {
			t.Fatalf("create %s: %v", nr.Interval, err)
		}
		return r
	}
	r1 := create(slotRun("orders", 1, 101, 2, 10*time.Second))
	r2 := create(slotRun("orders", 2, 102, 2, 5*time.Second))
	_, err := s.CreateRun(ctx, slotRun("orders", 3, 103, 2, 10*time.Second))
	e := refusedSlots(t, err, "a third run with max 2")
	if e.Pipeline != "orders" || e.Max != 2 || len(e.InProgress) != 2 || e.InProgress[0].Run != r1.ID || e.InProgress[1].Run != r2.ID {
		t.Fatalf("refusal = %+v, want orders, max 2, in progress %s and %s", e, r1.ID, r2.ID)
	}
	if ip := e.InProgress[0]; ip.Owner != (store.RunOwner{Host: "h1", PID: 101}) || ip.Interval != "2024-01-01" || ip.Submitted || ip.Since.IsZero() {
		t.Errorf("in progress = %+v, want %s of 2024-01-01 held by h1 pid 101", ip, r1.ID)
	}
	for _, want := range []string{"no free run slot: 2 of 2 runs of orders are in progress (max_active_runs): ",
		r1.ID + " (host h1, pid 101, since ", r2.ID + " (host h1, pid 102, since "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	// A run of an interval in progress is refused as busy first: that run
	// is named, not the slots.
	if _, err := s.CreateRun(ctx, slotRun("orders", 1, 104, 2, 10*time.Second)); !errors.Is(err, store.ErrRunBusy) {
		t.Errorf("a second run of 2024-01-01: err = %v, want ErrRunBusy", err)
	}
	// Nothing was recorded of the refused runs.
	if rs, err := s.ListRuns(ctx, store.RunFilter{Pipeline: "orders"}); err != nil || len(rs) != 2 {
		t.Fatalf("runs = %v, %v; want the two created", rs, err)
	}
	// Another pipeline's slots are its own, and without MaxActive nothing
	// is counted.
	create(slotRun("other", 1, 201, 1, 10*time.Second))
	create(slotRun("orders", 9, 109, 0, 10*time.Second))
	if _, err := s.CreateRun(ctx, slotRun("orders", 3, 103, 3, 10*time.Second)); err == nil {
		t.Fatal("with three runs in progress, max 3 still created a fourth")
	}
	if err := s.FinishRun(ctx, "orders/2024-01-09/r1", store.RunSucceeded); err != nil {
		t.Fatal(err)
	}
	// A finished run frees its slot.
	if err := s.FinishRun(ctx, r1.ID, store.RunFailed); err != nil {
		t.Fatal(err)
	}
	r3 := create(slotRun("orders", 3, 103, 2, 10*time.Second))
	refusedSlots(t, func() error { _, err := s.CreateRun(ctx, slotRun("orders", 4, 104, 2, 10*time.Second)); return err }(), "full again")
	// An expired lease is a pipec that died: it holds no slot (r2's lease
	// is 5 s, r3's 10 s).
	clock.Advance(6 * time.Second)
	r4 := create(slotRun("orders", 4, 104, 2, 10*time.Second))
	_, err = s.CreateRun(ctx, slotRun("orders", 5, 105, 2, 10*time.Second))
	if e := refusedSlots(t, err, "r3 and r4 live"); len(e.InProgress) != 2 || e.InProgress[0].Run != r3.ID || e.InProgress[1].Run != r4.ID {
		t.Errorf("in progress = %+v, want %s and %s", e.InProgress, r3.ID, r4.ID)
	}
	// A run taken over (its owner is known gone) gives its slot to the
	// run taking its interval over.
	nr := slotRun("orders", 3, 106, 2, 10*time.Second)
	nr.TakeOver = r3.ID
	if r := create(nr); r.ID != "orders/2024-01-03/r2" {
		t.Errorf("took over as %s, want orders/2024-01-03/r2", r.ID)
	}
}

func testRunSlotsSubmitted(t *testing.T, open Opener) {
	clock := newFakeClock()
	h := open(t, clock.Now)(t)
	ctx := context.Background()
	sub := func(day int) (store.Run, error) {
		nr := slotRun("orders", day, 0, 2, 0)
		nr.Owner = store.RunOwner{}
		return h.Submit(ctx, queue.Submission{Run: nr, Plan: []byte(`{"pipeline":"orders"}`), BaseDir: "/specs/orders",
			Interval: nr.Interval, Tasks: []queue.Task{{Name: "a"}}})
	}
	s1, err := sub(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.CreateRun(ctx, slotRun("orders", 2, 102, 2, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	// A submitted run holds no lease, and a slot however long it lasts.
	clock.Advance(time.Hour)
	r2b, err := h.CreateRun(ctx, slotRun("orders", 2, 103, 2, 10*time.Second))
	if err != nil {
		t.Fatalf("r2's lease expired, a new run of its interval: %v", err)
	}
	_, err = sub(3)
	e := refusedSlots(t, err, "Submit with both slots held")
	if len(e.InProgress) != 2 || e.InProgress[0] != (store.RunInProgress{Run: s1.ID, Interval: "2024-01-01", Submitted: true}) || e.InProgress[1].Run != r2b.ID {
		t.Fatalf("in progress = %+v, want %s (submitted) and %s", e.InProgress, s1.ID, r2b.ID)
	}
	if !strings.Contains(err.Error(), s1.ID+" (submitted to the workers)") {
		t.Errorf("message %q does not say %s is with the workers", err, s1.ID)
	}
	if _, err := h.CreateRun(ctx, slotRun("orders", 4, 104, 2, 10*time.Second)); err == nil {
		t.Fatal("a local run beside a submitted one and a leased one, max 2, was created")
	}
	if st, err := h.Status(ctx, "orders/2024-01-03/r1"); err == nil {
		t.Fatalf("the refused submission was recorded: %+v", st)
	}
	if err := h.FinishRun(ctx, s1.ID, store.RunSucceeded); err != nil {
		t.Fatal(err)
	}
	if _, err := sub(3); err != nil {
		t.Fatalf("a slot freed, Submit: %v", err)
	}
}

// testRunSlotsConcurrent: 4 handles × 3 callers each create runs of 24
// intervals with max 3, each holding its run a moment (yielding, so that
// without the store's serialization creations would interleave) before
// finishing it. A caller counts its run as active from when CreateRun
// returned until just before FinishRun, so the count is never more than
// the store's own: it must never exceed 3. Every interval is created in
// the end (a refused caller tries again), and some callers were refused.
func testRunSlotsConcurrent(t *testing.T, open Opener) {
	handle := open(t, nil)
	const handles, callers, intervals, slots = 4, 3, 24, 3
	hs := make([]Handle, handles)
	for i := range hs {
		hs[i] = handle(t)
	}
	ctx := context.Background()
	var mu sync.Mutex
	active, top, refusals := 0, 0, 0
	next := 0 // the next interval to create, 1-based days
	var wg sync.WaitGroup
	errs := make(chan error, handles*callers)
	for c := range handles * callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := hs[c%handles]
			for {
				mu.Lock()
				if next >= intervals {
					mu.Unlock()
					return
				}
				next++
				day := next
				mu.Unlock()
				var r store.Run
				for {
					var err error
					nr := slotRun("orders", day, 1000+c, slots, time.Minute)
					if day%2 == 0 {
						nr.Lease, nr.Owner = 0, store.RunOwner{}
						r, err = h.Submit(ctx, queue.Submission{Run: nr, Plan: []byte(`{"pipeline":"orders"}`),
							BaseDir: "/specs/orders", Interval: nr.Interval, Tasks: []queue.Task{{Name: "a"}}})
					} else {
						r, err = h.CreateRun(ctx, nr)
					}
					if err == nil {
						break
					}
					if !errors.Is(err, store.ErrNoRunSlot) {
						errs <- fmt.Errorf("create %s: %w", nr.Interval, err)
						return
					}
					mu.Lock()
					refusals++
					mu.Unlock()
					runtime.Gosched()
				}
				mu.Lock()
				active++
				top = max(top, active)
				mu.Unlock()
				for range 20 {
					runtime.Gosched()
				}
				time.Sleep(20 * time.Millisecond) // widens the window; no assertion depends on it
				mu.Lock()
				active--
				mu.Unlock()
				if err := h.FinishRun(ctx, r.ID, store.RunSucceeded); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if top > slots {
		t.Errorf("%d runs in progress at once, max_active_runs %d", top, slots)
	}
	rs, err := hs[0].ListRuns(ctx, store.RunFilter{Pipeline: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != intervals {
		t.Errorf("%d runs created, want %d (one per interval)", len(rs), intervals)
	}
	for _, r := range rs {
		if r.State != store.RunSucceeded {
			t.Errorf("%s is %s", r.ID, r.State)
		}
	}
	if refusals == 0 {
		t.Logf("no caller was refused (the callers never overlapped enough)")
	}
}
