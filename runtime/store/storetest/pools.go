package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// pooled is a task of pool "backfill" with slots.
func pooled(name string, slots int) queue.Task {
	return queue.Task{Name: name, Limits: once, Pool: "backfill", PoolSlots: slots}
}

// testPoolSlotsAcrossRuns: a pool's slots bound the pipeline's claimed
// tasks in it across runs and workers. With both slots taken by one run's
// tasks, another run's pooled task is passed over (its run says it waits
// for a slot in the pool) while its unpooled one is claimed; another
// pipeline's pool of the same name is its own; a finish frees a slot, and
// the next claim takes the waiting task and clears the message.
func testPoolSlotsAcrossRuns(t *testing.T, open Opener) {
	h := open(t, newFakeClock().Now)(t)
	register(t, h, "w1", "w2", "w3")
	r1 := submit(t, h, submission("2024-01-01", pooled("a", 2), pooled("b", 2)))
	r2 := submit(t, h, submission("2024-01-02", pooled("a", 2), task("c", once)))
	c1 := mustClaim(t, h, "w1", "a")
	mustClaim(t, h, "w2", "b")
	if c1.Run != r1 {
		t.Fatalf("first claim %s, want %s a", c1.Ref, r1)
	}
	if cl := claim(t, h, "w3"); cl == nil || cl.Run != r2 || cl.Task != "c" {
		t.Fatalf("w3 claimed %+v, want %s c (a waits for a slot in the pool)", cl, r2)
	}
	const msg = "task a: waiting for a slot in pool backfill (2 of 2 busy)"
	if rs, _ := status(t, h, r2); rs.Waiting != msg {
		t.Errorf("%s waiting = %q, want %q", r2, rs.Waiting, msg)
	}
	if cl := claim(t, h, "w3"); cl != nil {
		t.Fatalf("w3 claimed %s with the pool full", cl.Ref)
	}
	// Another pipeline's "backfill" is another pool.
	other := submission("2024-01-01", pooled("x", 1))
	other.Run.Pipeline, other.Plan = "other", []byte(`{"pipeline":"other"}`)
	ro := submit(t, h, other)
	if cl := claim(t, h, "w3"); cl == nil || cl.Run != ro {
		t.Fatalf("w3 claimed %+v, want %s x (its own pool)", cl, ro)
	}
	finish(t, h, "w1", c1, queue.Result{Ending: queue.Succeeded})
	if cl := claim(t, h, "w1"); cl == nil || cl.Run != r2 || cl.Task != "a" {
		t.Fatalf("after a finish, w1 claimed %+v, want %s a", cl, r2)
	}
	if rs, _ := status(t, h, r2); rs.Waiting != "" {
		t.Errorf("%s still waiting %q after its task was claimed", r2, rs.Waiting)
	}
	evs, err := h.Events(context.Background(), r2)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs {
		found = found || e.Kind == queue.EventRunWaiting && string(e.Payload) == `{"waiting":"`+msg+`"}`
	}
	if !found {
		t.Errorf("no %s event saying %q in %s", queue.EventRunWaiting, msg, r2)
	}
}

// testPoolConcurrentClaims: 6 handles claim the 150 pooled tasks of 3 runs
// (slots 3) at once, each holding a claim a moment before finishing it.
// There are more ready tasks than one claim looks at
// (queue.ClaimCandidates), so concurrent claims see different candidates
// and only the pool's count keeps them apart. A
// claimer counts its task as busy from when Claim returned until just
// before Finish, so the count is never more than the store's: it must
// never exceed the pool's 3 slots, and every task is run once.
func testPoolConcurrentClaims(t *testing.T, open Opener) {
	opener := open(t, nil)
	const workers, runs, each, slots = 6, 3, 50, 3
	h0 := opener(t)
	for r := range runs {
		var ts []queue.Task
		for i := range each {
			ts = append(ts, pooled(fmt.Sprintf("t%d", i), slots))
		}
		submit(t, h0, submission(fmt.Sprintf("2024-01-%02d", r+1), ts...))
	}
	handles := make([]Handle, workers)
	for i := range handles {
		handles[i] = opener(t)
		register(t, handles[i], fmt.Sprintf("w%d", i+1))
	}
	var mu sync.Mutex
	busy, top, done := 0, 0, 0
	seen := map[queue.Ref]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for i := range handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("w%d", i+1)
			for {
				mu.Lock()
				all := done == runs*each
				mu.Unlock()
				if all {
					return
				}
				cl, err := handles[i].Claim(context.Background(), name, lease)
				if err != nil {
					errs <- err
					return
				}
				if cl == nil {
					time.Sleep(time.Millisecond) // nothing free now: look again
					continue
				}
				mu.Lock()
				busy++
				top = max(top, busy)
				dup := seen[cl.Ref]
				seen[cl.Ref] = true
				mu.Unlock()
				if dup {
					errs <- fmt.Errorf("%s claimed twice", cl.Ref)
					return
				}
				time.Sleep(5 * time.Millisecond) // widens the window; no assertion depends on it
				mu.Lock()
				busy--
				mu.Unlock()
				if err := handles[i].Finish(context.Background(), name, cl.Ref, queue.Result{Ending: queue.Succeeded}); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				done++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if top > slots {
		t.Errorf("%d pooled tasks claimed at once, pool slots %d", top, slots)
	}
	rs, err := h0.ListRuns(context.Background(), store.RunFilter{Pipeline: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.State != store.RunSucceeded {
			t.Errorf("%s is %s", r.ID, r.State)
		}
	}
}
