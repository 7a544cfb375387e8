package queue

import (
	"context"
	"time"
)

// Pool slots held outside the claims. A task dispatched by another engine
// (Temporal: its visit is an activity, not a claimed work row) takes a
// pool slot by holding it in the state under a lease, and a claim of
// pipec's queue counts those holds beside its claimed work rows: one count,
// judged by PoolFull, whichever dispatcher runs the pipeline's tasks. A
// hold whose lease expired (its worker was killed, paused or cut off) no
// longer counts, as an expired claim no longer does once swept.

// PoolHolder is who holds a slot: a task of a run, visited by a worker.
// The slot is the task's (Run, Task): a later visit of the task, on any
// worker, takes the hold over, as a later claim of a task replaces the one
// whose lease expired.
type PoolHolder struct {
	Run, Task, Worker string
}

// PoolSlots is the store's side of the holds. Every method runs in one
// transaction of the store.
type PoolSlots interface {
	// HoldPoolSlot takes a slot of the pool key (PoolKey) for h under
	// lease when PoolHolding allows it: busy counts, in that transaction,
	// the pool's claimed work rows and the live holds of other holders
	// (h's own earlier hold is not counted, and is replaced). held says
	// whether h holds a slot now; busy is the count it was judged by
	// (without h), for PoolWaitingMessage when refused.
	HoldPoolSlot(ctx context.Context, key string, slots int, h PoolHolder, lease time.Duration) (busy int, held bool, err error)
	// RenewPoolSlot extends h's live hold to lease from now;
	// store.ErrLeaseLost when h holds none (it expired, or another visit
	// of the task took it over).
	RenewPoolSlot(ctx context.Context, key string, h PoolHolder, lease time.Duration) error
	// ReleasePoolSlot gives h's slot back (nothing when h holds none) and
	// wakes the workers that may claim a task of the pool now.
	ReleasePoolSlot(ctx context.Context, key string, h PoolHolder) error
}

// PoolHolding is HoldPoolSlot's decision, the claim's rule (PoolFull) for
// a task of pool key with slots when busy of the pool's slots are taken.
func PoolHolding(key string, slots, busy int) bool {
	return !PoolFull(&Work{Pool: key, PoolSlots: slots, PoolBusy: busy})
}
