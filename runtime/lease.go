package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/retry"
	"github.com/pipec/pipec/runtime/store"
)

// Leases
//
// Every attempt holds a lease in the store. A task with a heartbeat block
// renews its own, in one of two ways (both documented for task authors):
//
//   - touch the file named by PIPEC_HEARTBEAT: the runtime renews the lease
//     in the store each time it sees the file's modification time advance;
//   - run `pipec heartbeat`, which reads PIPEC_STATE, PIPEC_RUN_ID,
//     PIPEC_TASK, PIPEC_ATTEMPT and PIPEC_TOKEN and renews in the store
//     directly (and fails once the lease is lost). Under a database server's
//     state (a worker, or pipec run --state postgres://…) PIPEC_STATE is the
//     server's URL without its password, and pipec heartbeat renews through
//     the heartbeat file instead (BeatFile): the runtime renews the lease
//     in the store as it sees the file advance, and writes "lost" into the
//     file when the lease is lost, which the next pipec heartbeat reports.
//     A task never needs the database's credentials to keep its lease.
//
// A task without a heartbeat block gets a lease of Options.DefaultLease that
// the runtime renews while the process lives, so it expires only if pipec
// itself dies.
//
// Expiry is judged by the store alone (store.MarkUnknown, on the store's
// clock). leaseWatch polls it and tells the attempt's watcher, which may
// relaunch the task with a new, higher token without waiting for the old
// process: that one becomes a zombie, still watched, and if it ever finishes
// its publish is fenced by the newer token.

// leaseWatch polls the store for expired leases and wakes their watchers.
type leaseWatch struct {
	r       *runner
	period  time.Duration
	mu      sync.Mutex
	waiting map[store.AttemptRef]chan struct{}
}

func newLeaseWatch(r *runner) *leaseWatch {
	period := r.o.LeasePoll
	if period <= 0 {
		period = r.leasePoll
	}
	return &leaseWatch{r: r, period: period, waiting: map[store.AttemptRef]chan struct{}{}}
}

// leasePoll is how often a runner of p looks for expired leases: a fifth of
// its shortest heartbeat lease, between 20ms and a second.
func leasePoll(p *compiler.Plan) time.Duration {
	period := time.Second
	for i := range p.Tasks {
		if hb := p.Tasks[i].Heartbeat; hb != nil {
			if d, err := time.ParseDuration(hb.Lease); err == nil && d/5 < period {
				period = d / 5
			}
		}
	}
	return max(period, 20*time.Millisecond)
}

// watch returns a channel closed when the attempt's lease expires.
func (w *leaseWatch) watch(ref store.AttemptRef) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	w.waiting[ref] = ch
	return ch
}

func (w *leaseWatch) unwatch(ref store.AttemptRef) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waiting, ref)
}

func (w *leaseWatch) loop(ctx context.Context) {
	t := time.NewTicker(w.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.sweep(ctx)
		}
	}
}

func (w *leaseWatch) sweep(ctx context.Context) {
	expired, err := w.r.st.MarkUnknown(ctx)
	if err != nil {
		return // the next tick tries again
	}
	for _, a := range expired {
		w.expire(a.AttemptRef)
	}
	if w.r.visiting() {
		// A visit shares its store with other workers, whose sweeps mark
		// expired leases too: only the one that marked an attempt learns it
		// from MarkUnknown, so look at this visit's own attempts.
		w.mu.Lock()
		refs := make([]store.AttemptRef, 0, len(w.waiting))
		for ref := range w.waiting {
			refs = append(refs, ref)
		}
		w.mu.Unlock()
		for _, ref := range refs {
			if a, err := w.r.st.GetAttempt(ctx, ref); err == nil && a.State == store.AttemptUnknown {
				w.expire(ref)
			}
		}
	}
}

// expire wakes the attempt's watcher, once.
func (w *leaseWatch) expire(ref store.AttemptRef) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.waiting[ref]; ok {
		close(ch)
		delete(w.waiting, ref)
	}
}

// renewer renews one attempt's lease: on the heartbeat file's progress for a
// task with a heartbeat block, periodically for the others.
type renewer struct {
	r         *runner
	a         store.Attempt
	heartbeat bool
	lease     time.Duration
	period    time.Duration
	path      string
	lastMod   time.Time
	lastRenew time.Time
}

func newRenewer(r *runner, a store.Attempt, heartbeat bool, lease, every time.Duration) *renewer {
	n := &renewer{r: r, a: a, heartbeat: heartbeat, lease: lease, lastRenew: time.Now()}
	if heartbeat {
		n.path = r.heartbeatPath(a.AttemptRef)
		if st, err := os.Stat(n.path); err == nil {
			n.lastMod = st.ModTime()
		}
		// Look at the file often enough to renew well within the lease.
		n.period = min(lease/5, max(every/2, 10*time.Millisecond))
	} else {
		n.period = lease / 3
	}
	n.period = max(n.period, 10*time.Millisecond)
	return n
}

func (n *renewer) tick(ctx context.Context) {
	if n.heartbeat {
		st, err := os.Stat(n.path)
		if err != nil || !st.ModTime().After(n.lastMod) {
			return
		}
		n.lastMod = st.ModTime()
	}
	err := n.r.st.RenewLease(ctx, n.a.AttemptRef, n.a.Token, n.lease)
	if errors.Is(err, store.ErrLeaseLost) {
		// Marked unknown already: the sweep that did it wakes the watcher;
		// make sure it happens even if another process swept.
		n.r.leases.expire(n.a.AttemptRef)
	}
	n.lastRenew = time.Now()
}

// zombie is an attempt whose lease expired and whose task was relaunched; its
// process may still be alive.
type zombie struct {
	ts *taskState
	l  *launched
}

// adoptZombie keeps watching an unknown attempt: if it finishes, its outcome
// is recorded, and if it succeeded its outputs go through the same audit and
// publish as any attempt's, where its old token is fenced by its successor's.
func (r *runner) adoptZombie(ts *taskState, l *launched) {
	z := &zombie{ts: ts, l: l}
	r.zombieMu.Lock()
	r.zombieList = append(r.zombieList, z)
	r.zombieMu.Unlock()
	r.zombies.Add(1)
	go func() {
		defer r.zombies.Done()
		ctx := r.records
		res := l.proc.Wait()
		<-l.marked
		if res.Success() {
			_ = r.st.FinishAttempt(ctx, l.a.AttemptRef, store.Outcome{State: store.AttemptSucceeded, Reads: readsOf(l.inputs)})
			r.emitStore(store.EventAttemptFinished, ts.t.Name, l.a.Number, map[string]any{"state": "succeeded", "was": "unknown"})
			r.produce(ctx, ts.t, l, true)
			return
		}
		class := retry.Killed
		if !res.Stopped {
			class = r.classes.Classify(retry.Ending{ExitCode: res.ExitCode, TimedOut: res.TimedOut,
				Signaled: res.Signal != 0 && !res.TimedOut, Output: res.Tail}).Class
		}
		_ = r.st.FinishAttempt(ctx, l.a.AttemptRef, store.Outcome{State: store.AttemptFailed, Class: class,
			ExitCode: res.ExitCode, ErrorTail: res.Describe()})
		r.emitStore(store.EventAttemptFinished, ts.t.Name, l.a.Number, map[string]any{"state": "failed", "class": class,
			"was": "unknown", "why": res.Describe()})
	}()
}

// drainZombies waits for relaunched attempts' old processes to end, at most
// ZombieGrace after the tasks are done, then kills what is left.
func (r *runner) drainZombies() {
	r.zombieMu.Lock()
	none := len(r.zombieList) == 0
	r.zombieMu.Unlock()
	if none {
		// Nothing adopted (the tasks are done, so nothing will be): no
		// goroutine and timer to wait for nothing, at the end of every
		// worker's visit.
		return
	}
	done := make(chan struct{})
	go func() { r.zombies.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(r.o.ZombieGrace):
	case <-r.runCtx.Done():
	}
	r.zombieMu.Lock()
	list := append([]*zombie(nil), r.zombieList...)
	r.zombieMu.Unlock()
	for _, z := range list {
		select {
		case <-z.l.proc.Done():
		default:
			r.record(r.records, EventZombieKilled, z.ts.t.Name, z.l.a.Number,
				map[string]any{"reason": "its lease expired, its task was relaunched, and it did not end within the grace period"})
			z.l.proc.Stop()
		}
	}
	<-done
}

// beatLost is what the heartbeat file holds once the attempt's lease is lost.
const beatLost = "lost\n"

// ErrBeatLost is BeatFile's answer for an attempt whose lease is lost.
var ErrBeatLost = errors.New("the attempt's lease is lost")

// markBeatLost tells the attempt's heartbeat file that its lease is lost.
func markBeatLost(path string) {
	_ = os.WriteFile(path, []byte(beatLost), 0o600)
}

// BeatFile is `pipec heartbeat` through the heartbeat file: it advances the
// file's modification time, which the runtime watches, or returns
// ErrBeatLost when the runtime marked the lease lost (or the file is gone:
// the attempt is over). The file is only ever written by the runtime, so a
// read that sees it empty and a touch that follows are no race: a lease
// lost in between is refused in the store whatever the file says.
func BeatFile(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("heartbeat file %s is gone (the attempt is over): %w", path, ErrBeatLost)
	}
	if err != nil {
		return err
	}
	if string(b) == beatLost {
		return ErrBeatLost
	}
	now := time.Now()
	if err := os.Chtimes(path, now, now); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("heartbeat file %s is gone (the attempt is over): %w", path, ErrBeatLost)
		}
		return err
	}
	return nil
}
