package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// Pools on Temporal. A task's pool (pool "backfill" { slots = 2 }) bounds
// how many of the pipeline's tasks in it run at once, across runs and
// workers. Temporal does not judge it: a visit holds a slot of the pool in
// pipec's state (queue.PoolSlots) before it runs the task, under a lease it
// renews while the task runs, and gives it back when the visit ends. The
// state judges the hold with the rule its queue's claims use
// (queue.PoolFull), counting the holds and the queue's claimed tasks of the
// pool together, so workers of both dispatchers on one state share the
// pool's slots. While the pool is full the visit waits (Temporal hears the
// visit's heartbeat meanwhile) and its run says so once, as a claim says it
// (queue.PoolWaitingMessage).

// Pool waits poll the state from poolPollMin, doubling to poolPollMax.
const (
	poolPollMin = 20 * time.Millisecond
	poolPollMax = 500 * time.Millisecond
)

// poolSlot is a slot a visit holds; release gives it back.
type poolSlot struct {
	a    *Activities
	key  string
	h    queue.PoolHolder
	stop context.CancelFunc
	done chan struct{}
}

// poolOf is the task's pool key and slots in the plan ("", 0 for none),
// and the task itself.
func poolOf(p *compiler.Plan, task string) (string, int, *compiler.PlanTask) {
	for i := range p.Tasks {
		if t := &p.Tasks[i]; t.Name == task && t.Pool != "" {
			for _, pl := range p.Pools {
				if pl.Name == t.Pool {
					return queue.PoolKey(p.Pipeline, t.Pool), pl.Slots, t
				}
			}
		}
	}
	return "", 0, nil
}

// holdPool waits in vctx for a slot of the task's pool and holds it; nil
// when the task has no pool with slots. The error is vctx's when the visit
// was stopped while it waited (then it holds nothing).
func (a *Activities) holdPool(vctx context.Context, p *compiler.Plan, run, task string) (*poolSlot, error) {
	key, slots, t := poolOf(p, task)
	if key == "" || slots <= 0 {
		return nil, nil
	}
	lease := a.poolLease(t)
	h := queue.PoolHolder{Run: run, Task: task, Worker: a.Name}
	said := false
	for wait := poolPollMin; ; wait = min(2*wait, poolPollMax) {
		busy, held, err := a.Queue.HoldPoolSlot(vctx, key, slots, h, lease)
		if err == nil && held {
			break
		}
		if err != nil {
			if vctx.Err() != nil {
				return nil, vctx.Err()
			}
			// The state does not answer now: the visit waits, as for a
			// full pool (the runtime would fail to start the task too).
			a.logf("%s %s: holding a slot of pool %s: %v", run, task, queue.PoolName(key), err)
		} else if !said {
			said = true
			msg := queue.PoolWaitingMessage(&queue.Work{Ref: queue.Ref{Run: run, Task: task}, Pool: key, PoolSlots: slots, PoolBusy: busy})
			a.logf("%s %s: %s", run, task, msg)
			// No task on the event: a run's waiting message lasts until an
			// event of the task it names (its attempt starting).
			b, _ := json.Marshal(map[string]any{"waiting": msg})
			if _, err := a.Store.AppendEvent(vctx, store.Event{Run: run, Kind: queue.EventRunWaiting, Payload: b}); err != nil && vctx.Err() == nil {
				a.logf("%s %s: recording that it waits: %v", run, task, err)
			}
		}
		select {
		case <-vctx.Done():
			return nil, vctx.Err()
		case <-time.After(wait):
		}
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(vctx))
	s := &poolSlot{a: a, key: key, h: h, stop: stop, done: make(chan struct{})}
	go s.renew(rctx, slots, lease)
	return s, nil
}

// poolLease is how long a hold lasts unrenewed: the lease of the task's
// attempts (its heartbeat block's, else the worker's), so a worker paused
// or cut off from the state loses the slot when it loses the task, as a
// claim of the queue is lost.
func (a *Activities) poolLease(t *compiler.PlanTask) time.Duration {
	if hb := t.Heartbeat; hb != nil {
		if d, err := time.ParseDuration(hb.Lease); err == nil && d > 0 {
			return d
		}
	}
	if a.TaskLease > 0 {
		return a.TaskLease
	}
	return runtime.DefaultLease
}

// renew keeps the hold live (every lease/3) until release. A hold found
// lost (the worker was paused or cut off past its lease, so the runtime
// is stopping the task's attempt too) is taken again when the pool has a
// slot for it, and said otherwise.
func (s *poolSlot) renew(ctx context.Context, slots int, lease time.Duration) {
	defer close(s.done)
	t := time.NewTicker(max(lease/3, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := s.a.Queue.RenewPoolSlot(ctx, s.key, s.h, lease)
		if !errors.Is(err, store.ErrLeaseLost) {
			continue // renewed, or the state did not answer: the next tick tries again
		}
		if _, held, err := s.a.Queue.HoldPoolSlot(ctx, s.key, slots, s.h, lease); err == nil && !held {
			s.a.logf("%s %s: its slot of pool %s expired and the pool is full now", s.h.Run, s.h.Task, queue.PoolName(s.key))
		}
	}
}

// release stops the renewals and gives the slot back (also when the visit
// was cancelled: the state outlives the activity's context).
func (s *poolSlot) release() {
	if s == nil {
		return
	}
	s.stop()
	<-s.done
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.a.Queue.ReleasePoolSlot(ctx, s.key, s.h); err != nil {
		// Its lease frees it.
		s.a.logf("%s %s: giving back its slot of pool %s: %v", s.h.Run, s.h.Task, queue.PoolName(s.key), err)
	}
}

// stoppedWaiting is how a visit stopped while it waited for a pool slot
// ends: handed back when the worker shuts down, else as vctx's cause says
// (cancelled by the workflow, timed out, cut off from Temporal), not this
// worker's to report.
func stoppedWaiting(vctx context.Context, out VisitOutput) (VisitOutput, error) {
	cause := context.Cause(vctx)
	if errors.Is(cause, errShutdown) {
		out.Ending = queue.HandedBack
		return out, nil
	}
	return out, cause
}
