package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// backfillKey is the pool of pooled's tasks in the suite's pipeline.
var backfillKey = queue.PoolKey("orders", "backfill")

// hold holds a slot of backfillKey (slots) for task of run on worker and
// wants held; it returns the busy count.
func hold(t *testing.T, h Handle, slots int, ph queue.PoolHolder, want bool) int {
	t.Helper()
	busy, held, err := h.HoldPoolSlot(context.Background(), backfillKey, slots, ph, lease)
	if err != nil {
		t.Fatal(err)
	}
	if held != want {
		t.Fatalf("hold %+v (slots %d): held %v, want %v (busy %d)", ph, slots, held, want, busy)
	}
	return busy
}

// testPoolSlotHolds: holds (queue.PoolSlots) take a pool's slots up to its
// slots and the next is refused with the busy count; a holder taking its
// slot again is not counted against itself; a release and an expired
// lease free a slot, a renewed one keeps it, and a renewal of an expired
// hold is refused.
func testPoolSlotHolds(t *testing.T, open Opener) {
	clk := newFakeClock()
	h := open(t, clk.Now)(t)
	ctx := context.Background()
	a := queue.PoolHolder{Run: "orders/2024-01-01/r1", Task: "a", Worker: "w1"}
	b := queue.PoolHolder{Run: "orders/2024-01-01/r1", Task: "b", Worker: "w2"}
	c := queue.PoolHolder{Run: "orders/2024-01-02/r1", Task: "a", Worker: "w3"}
	if n := hold(t, h, 2, a, true); n != 0 {
		t.Errorf("first hold: busy %d, want 0", n)
	}
	if n := hold(t, h, 2, b, true); n != 1 {
		t.Errorf("second hold: busy %d, want 1", n)
	}
	n := hold(t, h, 2, c, false)
	w := queue.Work{Ref: queue.Ref{Run: c.Run, Task: c.Task}, Pool: backfillKey, PoolSlots: 2, PoolBusy: n}
	if msg := queue.PoolWaitingMessage(&w); msg != "task a: waiting for a slot in pool backfill (2 of 2 busy)" {
		t.Errorf("refused hold says %q", msg)
	}
	// Another visit of a (another worker) takes its slot over.
	a.Worker = "w4"
	if n := hold(t, h, 2, a, true); n != 1 {
		t.Errorf("a's hold taken over: busy %d, want 1 (b)", n)
	}
	if err := h.RenewPoolSlot(ctx, backfillKey, queue.PoolHolder{Run: a.Run, Task: a.Task, Worker: "w1"}, lease); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("renewal by the worker whose hold was taken over: %v, want ErrLeaseLost", err)
	}
	// Another pipeline's pool of the same name is another pool.
	if _, held, err := h.HoldPoolSlot(ctx, queue.PoolKey("other", "backfill"), 1, c, lease); err != nil || !held {
		t.Fatalf("hold in other/backfill: held %v, %v", held, err)
	}
	if err := h.ReleasePoolSlot(ctx, backfillKey, b); err != nil {
		t.Fatal(err)
	}
	if err := h.ReleasePoolSlot(ctx, backfillKey, b); err != nil {
		t.Errorf("a second release: %v", err)
	}
	if n := hold(t, h, 2, c, true); n != 1 {
		t.Errorf("hold after a release: busy %d, want 1", n)
	}
	hold(t, h, 2, b, false)
	// a is renewed, c is not: past c's lease, b takes c's slot.
	clk.Advance(lease / 2)
	if err := h.RenewPoolSlot(ctx, backfillKey, a, lease); err != nil {
		t.Fatal(err)
	}
	clk.Advance(lease/2 + time.Second)
	if err := h.RenewPoolSlot(ctx, backfillKey, c, lease); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("renewal of an expired hold: %v, want ErrLeaseLost", err)
	}
	if n := hold(t, h, 2, b, true); n != 1 {
		t.Errorf("hold after an expiry: busy %d, want 1 (a, renewed)", n)
	}
	hold(t, h, 2, c, false)
	// A pool of more slots (a newer plan) is judged by the slots asked.
	if n := hold(t, h, 3, c, true); n != 2 {
		t.Errorf("hold with slots 3: busy %d, want 2", n)
	}
}

// testPoolSlotsWithClaims: a claimed work row and a hold take slots of one
// count: a hold beside a claim is judged with the claim, and a claim of a
// pooled task is passed over while holds fill the pool (its run says it
// waits for a slot), then taken when a hold is released.
func testPoolSlotsWithClaims(t *testing.T, open Opener) {
	h := open(t, newFakeClock().Now)(t)
	ctx := context.Background()
	register(t, h, "w1", "w2")
	r1 := submit(t, h, submission("2024-01-01", pooled("a", 2), pooled("b", 2)))
	mustClaim(t, h, "w1", "a")
	x := queue.PoolHolder{Run: "orders/2024-01-05/r1", Task: "x", Worker: "t1"}
	y := queue.PoolHolder{Run: "orders/2024-01-05/r1", Task: "y", Worker: "t2"}
	if n := hold(t, h, 2, x, true); n != 1 {
		t.Errorf("hold beside a claim: busy %d, want 1", n)
	}
	if n := hold(t, h, 2, y, false); n != 2 {
		t.Errorf("refused hold: busy %d, want 2 (a claim and a hold)", n)
	}
	if cl := claim(t, h, "w2"); cl != nil {
		t.Fatalf("w2 claimed %s with the pool full (a claim and a hold)", cl.Ref)
	}
	const msg = "task b: waiting for a slot in pool backfill (2 of 2 busy)"
	if rs, _ := status(t, h, r1); rs.Waiting != msg {
		t.Errorf("%s waiting = %q, want %q", r1, rs.Waiting, msg)
	}
	if err := h.ReleasePoolSlot(ctx, backfillKey, x); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, h, "w2", "b")
	hold(t, h, 2, y, false)
}

// testPoolSlotsConcurrent: 3 handles hold and release slots while 3 others
// claim and finish pooled tasks of the same pool (slots 3), at once. Each
// counts its slot as taken from when it was granted until just before it
// gives it back, so the count is never more than the store's: it never
// exceeds 3, and every hold and every task gets its turn.
func testPoolSlotsConcurrent(t *testing.T, open Opener) {
	opener := open(t, nil)
	const slots, runs, each, holds = 3, 2, 15, 20
	h0 := opener(t)
	for r := range runs {
		var ts []queue.Task
		for i := range each {
			ts = append(ts, pooled(fmt.Sprintf("t%d", i), slots))
		}
		submit(t, h0, submission(fmt.Sprintf("2024-01-%02d", r+1), ts...))
	}
	var mu sync.Mutex
	busy, top, done := 0, 0, 0
	take := func() {
		mu.Lock()
		busy++
		top = max(top, busy)
		mu.Unlock()
	}
	give := func() {
		mu.Lock()
		busy--
		mu.Unlock()
	}
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 3 {
		h := opener(t)
		name := fmt.Sprintf("w%d", i+1)
		register(t, h, name)
		wg.Go(func() {
			for {
				mu.Lock()
				all := done == runs*each
				mu.Unlock()
				if all {
					return
				}
				cl, err := h.Claim(context.Background(), name, lease)
				if err != nil {
					errs <- err
					return
				}
				if cl == nil {
					time.Sleep(time.Millisecond)
					continue
				}
				take()
				time.Sleep(2 * time.Millisecond) // widens the window; no assertion depends on it
				give()
				if err := h.Finish(context.Background(), name, cl.Ref, queue.Result{Ending: queue.Succeeded}); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				done++
				mu.Unlock()
			}
		})
	}
	for i := range 3 {
		h := opener(t)
		wg.Go(func() {
			for n := 0; n < holds; {
				ph := queue.PoolHolder{Run: "orders/2024-02-01/r1", Task: fmt.Sprintf("h%d-%d", i, n), Worker: fmt.Sprintf("t%d", i)}
				_, held, err := h.HoldPoolSlot(context.Background(), backfillKey, slots, ph, lease)
				if err != nil {
					errs <- err
					return
				}
				if !held {
					time.Sleep(time.Millisecond)
					continue
				}
				take()
				time.Sleep(2 * time.Millisecond)
				give()
				if err := h.ReleasePoolSlot(context.Background(), backfillKey, ph); err != nil {
					errs <- err
					return
				}
				n++
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if top > slots {
		t.Errorf("%d slots of the pool taken at once by claims and holds, slots %d", top, slots)
	}
}
