// Package worker is pipec worker: a process that registers in a shared
// store, heartbeats, claims ready tasks of submitted runs under a lease,
// runs each as a local run would (runtime.RunVisit: inputs from the store,
// staged, audited, published with the attempt's token), and reports how the
// visit ended. The DAG advances in the store's transaction that records the
// end (queue.Queue.Finish), so any worker moves a run on and no coordinator
// exists to lose.
//
// Failures of a worker, as the failover model (internal/failover) sees them:
//
//   - graceful shutdown (the context is cancelled, SIGTERM): the worker stops
//     claiming, stops its tasks and hands them back; that counts nowhere;
//   - SIGKILL, SIGSTOP, a partition: its heartbeat stops, its claims' leases
//     expire, and any other worker's sweep hands those tasks to the model
//     as lost leases; their relaunch gets higher tokens, so whatever the old
//     process publishes later is fenced. A worker that comes back (SIGCONT)
//     learns from its next heartbeat which claims it lost, stops those
//     tasks and goes on claiming; until then its visits confirm their
//     claim before they end a process or start a non-idempotent task
//     (holds).
package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pipec/pipec/internal/goreuse"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/exec"
	"github.com/pipec/pipec/runtime/objstore"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/spec"
)

// DefaultLease is how long a worker and its claims stay live without a
// heartbeat.
const DefaultLease = 10 * time.Second

// Config configures a worker.
type Config struct {
	Info  queue.WorkerInfo
	Store store.Store
	Queue queue.Queue
	// Workdir is the worker's own scratch folder: logs, staging and
	// heartbeat files of its attempts.
	Workdir string
	// Artifacts is the folder of the shared artifact store as this machine
	// mounts it (--artifacts); it wins over the plan's artifacts field (see
	// runtime.Options.Artifacts).
	Artifacts string
	// DefaultArtifacts is the store when neither Artifacts nor the plan
	// names one: versions/ beside a state file the workers of one machine
	// share ("" for a database server: no default, see
	// runtime.Options.DefaultArtifacts).
	DefaultArtifacts string
	// ServerState is the shared state as tasks get it in PIPEC_STATE
	// (runtime.Options.ServerState): a server's URL without its password,
	// and their `pipec heartbeat` renews through the heartbeat file this
	// worker watches; or a shared SQLite file's absolute path, in which it
	// renews directly.
	ServerState string
	// Environ is the worker's environment; tasks get a filtered part of it
	// (as in a local run) and PIPEC_WORKER.
	Environ []string
	// Lease is the worker's and its claims' lease (DefaultLease when 0);
	// it heartbeats every Poll (Lease/5, at least 20ms, when 0).
	Lease time.Duration
	Poll  time.Duration
	// TaskLease, LeasePoll and KillGrace tune the runtime of each visit
	// (zero: the runtime's defaults).
	TaskLease, LeasePoll, KillGrace time.Duration
	// Log receives one line per thing the worker does.
	Log io.Writer

	logMu *sync.Mutex
	// outage: the last heartbeat failed (said once, and once when it ends).
	outage bool
	// claimFailing: the last claim failed (said once, and once when a
	// claim goes through again): a server with no connection left fails
	// every claim of every turn of the loop while heartbeats, on pooled
	// connections, still pass.
	claimFailing bool
	// unrun: the claims the last heartbeat held that no visit ran
	// (endUnrun).
	unrun map[queue.Ref]bool
	// unended: the claims of visits that ended but whose end the store did
	// not take (it did not answer). They stay the worker's in the store
	// until a heartbeat no longer lists them or endUnrun hands them back;
	// a graceful stop hands them back, or says it could not.
	unended map[queue.Ref]bool
	// self is this machine, recorded with the attempts its claims start.
	self  exec.Identity
	plans *planCache
	// claiming: the worker takes new tasks (healthy, not stopping); a
	// visit's Finish claims the next one only then.
	claiming *atomic.Bool
	// stop is closed when the worker is told to stop (Run's context);
	// the tests' hook waits on it (hook_testhook.go).
	stop <-chan struct{}
	// objects serves every visit's object stores, so credentials are
	// resolved once per worker, not once per task.
	objects *objstore.Clients
	// visitGos runs the visits: a kept goroutine's stack is grown already
	// (internal/goreuse).
	visitGos *goreuse.Pool
}

// visit is one task this worker runs.
type visit struct {
	cl *queue.Claim
	// claimedAt is when the claim was asked for (before its transaction
	// began): the claim expires no sooner than a lease after it.
	claimedAt time.Time
	cancel    context.CancelCauseFunc
	// finishing is set before the visit's Finish: from then on a claim
	// missing from a heartbeat is the visit's own end (or, if it was taken
	// over, Finish says so), not a takeover to stop it for.
	finishing atomic.Bool
	// stopped is set (under the worker's visits lock) once a heartbeat
	// found the claim taken over, so that is said and done once, however
	// long the task takes to stop.
	stopped bool
	// unfinished is set when the store did not take the visit's Finish
	// (not answering): its claim expires after the lease instead.
	unfinished atomic.Bool
}

// errShutdown cancels visits when the worker stops gracefully; errTakenOver
// when a heartbeat says the claim is another worker's now.
var (
	errShutdown  = errors.New("the worker is shutting down")
	errTakenOver = errors.New("the claim's lease expired and another worker took the task over")
)

// runCancelled cancels a visit whose run was cancelled (pipec cancel),
// which took its claim: a claim lost as a takeover's is (errors.Is), said
// as what it is.
type runCancelled struct{ by string }

func (e runCancelled) Error() string        { return "its run was cancelled " + e.by }
func (e runCancelled) Is(target error) bool { return target == errTakenOver }

// bounded bounds one call of the worker to the store (queue.Bound).
func (c *Config) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return queue.Bound(ctx, c.Lease)
}

// Run runs the worker until ctx is cancelled (a graceful stop: running tasks
// are stopped and handed back, uncounted). A store unreachable for longer
// than a lease stops the worker's tasks, not the worker.
func Run(ctx context.Context, c Config) error {
	if c.Info.Name == "" || c.Store == nil || c.Queue == nil || c.Workdir == "" {
		return errors.New("worker: a name, a store, a queue and a workdir are required")
	}
	if c.Info.Slots <= 0 {
		c.Info.Slots = 1
	}
	for _, l := range c.Info.Labels {
		if !spec.ValidLabel(l) {
			return fmt.Errorf("worker: %s", spec.LabelError(l))
		}
	}
	c.Info.Labels = queue.NormalLabels(c.Info.Labels)
	c.objects = new(objstore.Clients)
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.Poll <= 0 {
		c.Poll = max(c.Lease/5, 20*time.Millisecond)
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	c.logMu = &sync.Mutex{}
	c.self, _ = exec.Self() // as the runtime's own attempts record it
	c.self = c.testIdentity(c.self)
	c.plans = newPlanCache()
	c.unended = map[queue.Ref]bool{}
	c.claiming = new(atomic.Bool)
	c.visitGos = new(goreuse.Pool)
	defer c.visitGos.Close()
	c.stop = ctx.Done()
	bg := context.WithoutCancel(ctx)
	// The attempts' folders in its workdir are its state's alone: a
	// worker of another state given it (the same --name on one machine,
	// whose default workdir is the same) is refused before it claims.
	id, err := c.Store.StateID(ctx)
	if err == nil {
		err = store.ClaimScratch(c.Workdir, id, c.ServerState)
	}
	if err != nil {
		return fmt.Errorf("worker %s: %w", c.Info.Name, err)
	}
	if err := c.register(bg); err != nil {
		return err
	}
	labels := "none"
	if len(c.Info.Labels) > 0 {
		labels = strings.Join(c.Info.Labels, ",")
	}
	c.logf("worker %s registered (host %s, pid %d, slots %d, labels %s)", c.Info.Name, c.Info.Host, c.Info.PID, c.Info.Slots, labels)

	var wg sync.WaitGroup
	var mu sync.Mutex
	visits := map[queue.Ref]*visit{}
	ended := make(chan visitEnd, c.Info.Slots)
	tick := time.NewTicker(c.Poll)
	defer tick.Stop()
	wake := &wakeups{q: c.Queue, logf: c.logf, bound: c.Lease}
	defer wake.off()
	lastOK := time.Now()
	due := true // heartbeat, sweep and lease check now
	// looked: a visit's end just looked for work in its own transaction
	// and found none, so the loop does not look again at once (in a narrow
	// DAG, where workers go idle at most ends, a claim that finds nothing
	// each time); it begins listening, and then looks, as ever.
	looked := false
	for {
		healthy := true
		if due {
			due = false
			healthy = c.beat(bg, &mu, visits, &lastOK)
		}
		c.claiming.Store(healthy && ctx.Err() == nil)
		if healthy && ctx.Err() == nil {
			if !looked {
				c.claim(bg, &mu, visits, &wg, ended)
			}
			if c.slotFree(&mu, visits) && wake.on(bg) {
				// Listening from now on: a task made ready after the
				// claim looked and before the listening began is
				// claimed now, any later one wakes the worker.
				c.claim(bg, &mu, visits, &wg, ended)
			}
			if !c.slotFree(&mu, visits) {
				wake.off()
			}
		}
		looked = false
		select {
		case <-ctx.Done():
			c.claiming.Store(false)
			return c.shutdown(bg, &mu, visits, &wg, ended)
		case e := <-ended:
			mu.Lock()
			if v := visits[e.ref]; v != nil && v.unfinished.Load() {
				c.unended[e.ref] = true
			}
			delete(visits, e.ref)
			mu.Unlock()
			looked = e.next == nil && e.looked
			switch {
			case e.next == nil:
			case ctx.Err() != nil:
				// Told to stop as the visit ended: its next claim is
				// not begun but handed back, as shutdown's are.
				c.handBack(bg, e.next)
			default:
				c.startVisit(bg, e.next, e.nextAt, &mu, visits, &wg, ended)
			}
		case _, ok := <-wake.ch:
			if !ok {
				wake.off() // its connection broke: listening again at the next look
			}
		case <-tick.C:
			due = true
		}
	}
}

// slotFree says whether the worker has a slot for one more visit.
func (c *Config) slotFree(mu *sync.Mutex, visits map[queue.Ref]*visit) bool {
	mu.Lock()
	defer mu.Unlock()
	return len(visits) < c.Info.Slots
}

// wakeups listens for the queue's wakeups (queue.Queue.Wakeups) while the
// worker has a free slot and found nothing to claim, not while its slots
// are full: each listener costs the store a signal and the worker a wakeup
// at every notification (on PostgreSQL, nearly every finish), and a busy
// worker has no use for them. ch is nil while not listening (a select
// never takes it).
type wakeups struct {
	q      queue.Queue
	logf   func(format string, args ...any)
	bound  time.Duration // how long beginning to listen may take (a lease)
	ch     <-chan struct{}
	stop   context.CancelFunc
	failed bool // the last try failed: logged once, until one succeeds
}

// on listens, unless it does already; began says it began now (the caller
// then looks for work once more).
func (w *wakeups) on(ctx context.Context) (began bool) {
	if w.ch != nil {
		return false
	}
	lctx, stop := context.WithCancel(ctx)
	// Listening that has not begun within its bound is given up (see
	// queue.Bound); should it begin just as the bound passes, it ends at
	// once, and its channel closes.
	late := time.AfterFunc(w.bound, stop)
	ch, err := w.q.Wakeups(lctx)
	if !late.Stop() && err == nil {
		err = fmt.Errorf("the store did not begin listening within %s", w.bound)
	}
	if err != nil {
		stop()
		if !w.failed {
			w.logf("no wakeups, polling only: %v", err)
		}
		w.failed = true
		return false
	}
	w.ch, w.stop, w.failed = ch, stop, false
	return true
}

// off stops listening.
func (w *wakeups) off() {
	if w.stop != nil {
		w.stop()
	}
	w.ch, w.stop = nil, nil
}

// beat heartbeats (stopping the visits whose claims were taken over), then
// sweeps expired claims and leases. healthy is false while the store is
// unreachable; once that lasted a lease, the worker's tasks are stopped.
func (c *Config) beat(ctx context.Context, mu *sync.Mutex, visits map[queue.Ref]*visit, lastOK *time.Time) bool {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	held, err := c.Queue.Heartbeat(ctx, c.Info.Name, c.Lease)
	if errors.Is(err, store.ErrNotFound) {
		// Deregistered under us (a name reused after we stopped): again.
		err = c.register(ctx)
		held = nil
	}
	if err != nil {
		if !c.outage {
			c.outage = true
			c.logf("heartbeat: %v; the store is unreachable, trying again every %s", err, c.Poll)
		}
		if time.Since(*lastOK) > c.Lease {
			// The claims are someone else's by now: stop their tasks (a
			// lost lease), but stay up and go on claiming once the store
			// is back.
			mu.Lock()
			for ref, v := range visits {
				if !v.stopped {
					v.stopped = true
					c.logf("%s %s: the store was unreachable for longer than the lease; stopping it", ref.Run, ref.Task)
					v.cancel(errTakenOver)
				}
			}
			mu.Unlock()
		}
		return false
	}
	if c.outage {
		c.outage = false
		c.logf("the store is reachable again")
	}
	*lastOK = time.Now()
	holds := map[queue.Ref]bool{}
	for _, r := range held {
		holds[r] = true
	}
	for ref := range c.unended {
		if !holds[ref] {
			delete(c.unended, ref) // its end was taken after all, or it was swept
		}
	}
	mu.Lock()
	finishing := false
	var lost []*visit
	for ref, v := range visits {
		if !holds[ref] && !v.stopped && !v.finishing.Load() {
			v.stopped = true
			lost = append(lost, v)
		}
		finishing = finishing || v.finishing.Load()
	}
	unrun := map[queue.Ref]bool{}
	for _, r := range held {
		if visits[r] == nil && !finishing {
			unrun[r] = true
		}
	}
	mu.Unlock()
	for _, v := range lost {
		c.stopLost(ctx, v)
	}
	c.endUnrun(ctx, unrun)
	if _, err := c.Queue.Sweep(ctx); err != nil {
		c.logf("sweep: %v", err)
	}
	if _, err := c.Store.MarkUnknown(ctx); err != nil {
		c.logf("mark unknown: %v", err)
	}
	return true
}

// stopLost stops visit v, whose claim the store no longer gives this
// worker: its run was cancelled (pipec cancel), or the claim expired and
// another worker took the task over. Its process is stopped for that
// reason, which its attempt records.
func (c *Config) stopLost(ctx context.Context, v *visit) {
	ref := v.cl.Ref
	if r, err := c.Store.GetRun(ctx, ref.Run); err == nil && r.State == store.RunCancelled {
		c.logf("%s %s: its run was cancelled %s; stopping it", ref.Run, ref.Task, r.Cancelled)
		v.cancel(runCancelled{by: r.Cancelled})
		return
	}
	c.logf("%s %s: lost its claim here (taken over); stopping it", ref.Run, ref.Task)
	v.cancel(errTakenOver)
}

// endUnrun ends the claims that the store says this worker holds and no
// visit of it runs, unrun at two heartbeats in a row (none of them the
// next claim of a visit's end, taken with it: no visit was finishing): a
// crash of the server took back the end of a visit, or of its hand-back,
// and the claim would otherwise hold its task, and the run, for as long as
// the worker lives. Each ends as a lost lease does: its task goes back to
// the queue, and the next visit settles what the lost end left (an
// attempt that looks started).
func (c *Config) endUnrun(ctx context.Context, unrun map[queue.Ref]bool) {
	for ref := range unrun {
		if !c.unrun[ref] {
			continue
		}
		delete(unrun, ref)
		c.logf("%s %s: the store says this worker holds it, and no visit here runs it (the store lost its end?); handing it back", ref.Run, ref.Task)
		if !c.endAsLost(ctx, ref, "the store lost the end of its visit on "+c.Info.Name) {
			unrun[ref] = true // tried again at the next heartbeat
			continue
		}
		delete(c.unended, ref)
	}
	c.unrun = unrun
}

// holds is a visit's runtime.Visit.Held: whether the worker's claim cl is
// still its own, as a heartbeat answers. A worker paused past its lease
// (or starved) learns that its claim was taken over only from its next
// heartbeat, and its visit must not end the takeover's process as an
// orphan, nor start a non-idempotent task beside it, meanwhile. A claim
// whose transaction read the task's attempts and started its first one
// (PostgreSQL) needs no asking: what the visit read was read while the
// claim held, and a swept claim's attempt refuses to start. (A visit that
// begins half a lease after its claim asks first either way: runVisit.)
func (c *Config) holds(cl *queue.Claim) func(context.Context) error {
	if cl.HasPrior && cl.Attempt != nil {
		return nil
	}
	return func(ctx context.Context) error { return c.heldNow(ctx, cl) }
}

// heldNow asks the store whether cl is still this worker's claim: a
// heartbeat, and its answer.
func (c *Config) heldNow(ctx context.Context, cl *queue.Claim) error {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	held, err := c.Queue.Heartbeat(ctx, c.Info.Name, c.Lease)
	if err != nil {
		return fmt.Errorf("the store could not confirm the claim: %w", err)
	}
	if !slices.Contains(held, cl.Ref) {
		return errors.New("the claim was taken over")
	}
	return nil
}

// register registers the worker. A live registration of its name by an
// earlier process on this host that is gone (killed, and restarted by a
// supervisor under the same name) is taken over at once: its claims expire
// and are failed over as any lost worker's.
func (c *Config) register(ctx context.Context) error {
	err := c.Queue.Register(ctx, c.Info, c.Lease)
	var live *queue.WorkerLiveError
	if errors.As(err, &live) && live.Host == c.Info.Host && live.PID != c.Info.PID && !exec.Alive(live.PID) {
		c.logf("worker %s: its earlier process (pid %d) is gone; taking its name over", c.Info.Name, live.PID)
		c.Info.Replaces = live.PID
		err = c.Queue.Register(ctx, c.Info, c.Lease)
	}
	return err
}

// claim takes ready tasks while slots are free and starts their visits.
func (c *Config) claim(ctx context.Context, mu *sync.Mutex, visits map[queue.Ref]*visit, wg *sync.WaitGroup, ended chan<- visitEnd) {
	for {
		if !c.slotFree(mu, visits) {
			return
		}
		at := time.Now()
		cl, err := c.claimOne(ctx)
		if err != nil {
			if !c.claimFailing {
				c.claimFailing = true
				c.logf("claim: %v; trying again at each heartbeat and wakeup", err)
			}
			return
		}
		if c.claimFailing {
			c.claimFailing = false
			c.logf("claims go through again")
		}
		if cl == nil {
			return
		}
		c.startVisit(ctx, cl, at, mu, visits, wg, ended)
	}
}

// visitEnd is a visit's end as its goroutine reports it: the next task its
// Finish claimed (queue.FinishClaimer), if any, takes its slot; nextAt is
// when that claim was asked for; looked says that the Finish looked for
// one (and found none, when next is nil).
type visitEnd struct {
	ref    queue.Ref
	next   *queue.Claim
	nextAt time.Time
	looked bool
}

// startVisit runs a claimed task's visit on its own goroutine; at is when
// the claim was asked for.
func (c *Config) startVisit(ctx context.Context, cl *queue.Claim, at time.Time, mu *sync.Mutex, visits map[queue.Ref]*visit, wg *sync.WaitGroup, ended chan<- visitEnd) {
	vctx, cancel := context.WithCancelCause(ctx)
	v := &visit{cl: cl, claimedAt: at, cancel: cancel}
	mu.Lock()
	visits[cl.Ref] = v
	mu.Unlock()
	c.logf("%s %s: start %d on %s (%s)", cl.Run, cl.Task, cl.Failover.Starts, c.Info.Name, cl.Failover.Describe(cl.Limits, nil))
	wg.Add(1)
	c.visitGos.Go(func() {
		defer wg.Done()
		e := c.runVisit(vctx, v)
		e.ref = cl.Ref
		ended <- e
	})
}

// shutdown is the graceful stop: no more claims, running tasks stopped and
// handed back, then the worker is deregistered.
func (c *Config) shutdown(ctx context.Context, mu *sync.Mutex, visits map[queue.Ref]*visit, wg *sync.WaitGroup, ended <-chan visitEnd) error {
	call := func(f func(context.Context) error) error {
		ctx, cancel := c.bounded(ctx)
		defer cancel()
		return f(ctx)
	}
	if err := call(func(ctx context.Context) error { return c.Queue.Stopping(ctx, c.Info.Name) }); err != nil {
		c.logf("stopping: %v", err)
	}
	mu.Lock()
	stopped := make([]*visit, 0, len(visits))
	for _, v := range visits {
		v.cancel(errShutdown)
		stopped = append(stopped, v)
	}
	mu.Unlock()
	c.logf("worker %s stopping: handing back %d task(s)", c.Info.Name, len(stopped))
	// Keep the claims alive while the tasks stop, so none expires into a
	// counted failover.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTicker(c.Poll)
	defer t.Stop()
	// A visit that waits for a store that does not answer (a write the
	// runtime makes whatever befalls the run) is not waited for forever
	// (queue.ErrNotHandedBack).
	giveUp := time.Now().Add(queue.StopWaits(c.Lease, c.KillGrace))
	for {
		select {
		case <-done:
			kept := c.handBackNext(ctx, ended) + c.handBackUnended(ctx)
			for _, v := range stopped {
				if v.unfinished.Load() {
					kept++
				}
			}
			err := call(func(ctx context.Context) error { return c.Queue.Deregister(ctx, c.Info.Name) })
			if kept > 0 {
				// The visits gave up on a store that did not answer
				// (runtime.Options.RecordWithin) before the worker did.
				c.logf("worker %s stopped without handing its tasks back: the store did not take the ends of %d; their claims expire after the lease", c.Info.Name, kept)
				return queue.ErrNotHandedBack
			}
			if err != nil {
				return err
			}
			c.logf("worker %s stopped", c.Info.Name)
			return nil
		case <-t.C:
			err := call(func(ctx context.Context) error {
				_, err := c.Queue.Heartbeat(ctx, c.Info.Name, c.Lease)
				return err
			})
			if err != nil && time.Now().After(giveUp) {
				c.logf("worker %s stopped without handing its tasks back: the store does not answer (%v); their claims expire after the lease", c.Info.Name, err)
				return queue.ErrNotHandedBack
			}
		}
	}
}

// handBackNext hands back, uncounted, the tasks that visits' Finish claimed
// after the worker stopped starting visits (queue.FinishClaimer), and says
// how many the store did not take back.
func (c *Config) handBackNext(ctx context.Context, ended <-chan visitEnd) (kept int) {
	for {
		select {
		case e := <-ended:
			if e.next != nil && !c.handBack(ctx, e.next) {
				kept++
			}
		default:
			return kept
		}
	}
}

// handBackUnended ends, as lost leases, the claims of visits that ended
// before the stop but whose end the store did not take (unended; the
// visits the stop itself ended are counted by shutdown), and says how many
// the store did not take either.
func (c *Config) handBackUnended(ctx context.Context) (kept int) {
	for ref := range c.unended {
		fctx, cancel := c.bounded(ctx)
		if !c.endAsLost(fctx, ref, "the end of its visit on "+c.Info.Name+" did not reach the store") {
			kept++
		}
		cancel()
	}
	return kept
}

// endAsLost ends ref's claim as a lost lease, why its reason, and says
// whether the store took the end (or the claim was no longer the
// worker's); it logs why not.
func (c *Config) endAsLost(ctx context.Context, ref queue.Ref, why string) bool {
	err := c.finish(ctx, ref, queue.Result{Ending: queue.LeaseLost, Reason: why})
	if err != nil && !errors.Is(err, store.ErrLeaseLost) {
		c.logf("%s %s: hand back: %v", ref.Run, ref.Task, err)
		return false
	}
	return true
}

// handBack returns a claim no visit began, uncounted.
func (c *Config) handBack(ctx context.Context, cl *queue.Claim) (taken bool) {
	r := queue.Result{Ending: queue.HandedBack}
	if cl.Attempt != nil {
		r.Unused = &cl.Attempt.AttemptRef
	}
	err := c.finish(ctx, cl.Ref, r)
	if err != nil {
		c.logf("%s %s: hand back: %v", cl.Run, cl.Task, err)
	}
	return err == nil || errors.Is(err, store.ErrLeaseLost) // a lost claim is not ours to hand back
}

// runVisit runs one claimed task and reports how it ended; when the queue
// claims the worker's next task in the same transaction
// (queue.FinishClaimer), it returns that claim.
func (c *Config) runVisit(ctx context.Context, v *visit) (e visitEnd) {
	cl := v.cl
	bg := context.WithoutCancel(ctx)
	var end *queue.AttemptEnd    // the last attempt's end, recorded by Finish
	var unused *store.AttemptRef // the claim's attempt
	if cl.Attempt != nil {
		unused = &cl.Attempt.AttemptRef // until the visit says it ran it
	}
	finish := func(r queue.Result) {
		r.End, r.Unused = end, unused
		v.finishing.Store(true)
		c.hook(hookBeforeFinish, cl.Task)
		var err error
		e.nextAt = time.Now()
		e.next, e.looked, err = c.finishClaiming(bg, cl.Ref, r)
		if err == nil {
			c.hook(hookAfterFinish, cl.Task)
		}
		switch {
		case errors.Is(err, store.ErrLeaseLost) && errors.As(context.Cause(ctx), new(runCancelled)):
			// Said already: its run was cancelled.
		case errors.Is(err, store.ErrLeaseLost):
			c.logf("%s %s: its outcome is not this worker's to report any more (taken over)", cl.Run, cl.Task)
		case err != nil:
			v.unfinished.Store(true)
			c.logf("%s %s: finish: %v", cl.Run, cl.Task, err)
		}
	}
	c.hook(hookBeforeVisit, cl.Task)
	pctx, cancel := c.bounded(bg)
	sub, err := c.plan(pctx, cl.Run)
	cancel()
	if err != nil {
		// Without its plan the task cannot run here; another worker may
		// read it (a broken connection), so this is no failure of the task.
		c.logf("%s %s: %v; handing it back", cl.Run, cl.Task, err)
		finish(queue.Result{Ending: queue.HandedBack, Reason: "its plan could not be read"})
		return
	}
	if time.Since(v.claimedAt) > c.Lease/2 {
		// The claim may have expired while this worker was paused or
		// starved, and its task been taken over by another: a visit that
		// began now would start the task beside the takeover's (the
		// claim's own read of the task's attempts predates it), before any
		// heartbeat told it. So the store is asked first. A younger claim
		// cannot have expired, and costs nothing. Handed back, uncounted,
		// when the answer is not yes: refused if it is another worker's,
		// claimed again if the store was only out of reach.
		if err := c.heldNow(ctx, cl); err != nil {
			c.logf("%s %s: not begun: %v", cl.Run, cl.Task, err)
			finish(queue.Result{Ending: queue.HandedBack, Reason: "its claim could not be confirmed"})
			return
		}
	}
	res, err := runtime.RunVisit(ctx, runtime.Visit{
		Options: c.visitOptions(sub),
		Run:     cl.Run, Task: cl.Task, AttemptBase: cl.AttemptBase, Started: cl.Attempt,
		Prior: cl.Prior, HasPrior: cl.HasPrior, Held: c.holds(cl)})
	end, unused = res.End, res.Unused
	if err != nil && cl.Attempt != nil {
		unused = &cl.Attempt.AttemptRef // the visit could not even begin
	}
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errShutdown):
		c.logf("%s %s: handed back", cl.Run, cl.Task)
		finish(queue.Result{Ending: queue.HandedBack})
	case errors.As(cause, new(runCancelled)):
		// The cancellation ended the claim; the Finish still records how
		// the attempt ended (End), which the store takes.
		c.logf("%s %s: stopped here: %v", cl.Run, cl.Task, cause)
		finish(queue.Result{Ending: queue.LeaseLost})
	case errors.Is(cause, errTakenOver) || res.LeaseLost:
		c.logf("%s %s: stopped here: this worker's lease on it expired", cl.Run, cl.Task)
		finish(queue.Result{Ending: queue.LeaseLost}) // refused when another worker has it already
	default:
		r, said := res.Ended(err, c.Info.Name)
		if said != "" {
			c.logf("%s %s: %s", cl.Run, cl.Task, said)
		}
		finish(r)
	}
	return e
}

// visitOptions are the options of every visit of sub's plan.
func (c *Config) visitOptions(sub *submitted) runtime.Options {
	env := append(append([]string(nil), c.Environ...), "PIPEC_WORKER="+c.Info.Name)
	return runtime.Options{Plan: sub.plan, BaseDir: sub.baseDir, Interval: sub.interval, Store: c.Store,
		Scratch: c.Workdir, ServerState: c.ServerState, Artifacts: c.Artifacts,
		DefaultArtifacts: c.DefaultArtifacts, Environ: env, Worker: c.Info.Name, Self: c.self,
		DefaultLease: c.TaskLease, LeasePoll: c.LeasePoll, KillGrace: c.KillGrace, ObjectStores: c.objects,
		Goroutines: c.visitGos, Setup: sub.setup, RecordWithin: c.Lease, Force: sub.forced, AfterExit: c.afterExit()}
}

// claimOne claims a task, starting its first attempt in the claim's
// transaction when the queue can (queue.AttemptStarter).
func (c *Config) claimOne(ctx context.Context) (*queue.Claim, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	if qs, ok := c.Queue.(queue.AttemptStarter); ok {
		return qs.ClaimStarting(ctx, c.Info.Name, c.Lease, c.attemptSpec())
	}
	return c.Queue.Claim(ctx, c.Info.Name, c.Lease)
}

// attemptSpec is what a claim's first attempt records of this worker.
func (c *Config) attemptSpec() store.AttemptSpec {
	return store.AttemptSpec{Worker: c.Info.Name, Host: c.self.Host, Boot: c.self.Boot}
}

// finishClaiming is finish, and, while the worker claims, the next task
// claimed in the same transaction when the queue can (queue.FinishClaimer).
// A first try that fails is retried as a plain finish: nothing of it
// committed, or (a lost claim) Finish says so again.
func (c *Config) finishClaiming(ctx context.Context, ref queue.Ref, r queue.Result) (next *queue.Claim, looked bool, err error) {
	if fc, ok := c.Queue.(queue.FinishClaimer); ok && c.claiming.Load() {
		fctx, cancel := c.bounded(ctx)
		next, err := fc.FinishClaiming(fctx, c.Info.Name, ref, r, c.Lease, c.attemptSpec())
		cancel()
		if err == nil || errors.Is(err, store.ErrLeaseLost) {
			return next, err == nil, err
		}
	}
	return nil, false, c.finish(ctx, ref, r)
}

// finish is Queue.Finish, tried again while the store is unreachable (for
// up to a lease: the claim is someone else's after that), so a brief outage
// does not turn a finished task into a rerun. A commit whose answer was lost
// is seen by the next try as a claim no longer held.
func (c *Config) finish(ctx context.Context, ref queue.Ref, r queue.Result) error {
	deadline := time.Now().Add(c.Lease)
	for {
		fctx, cancel := c.bounded(ctx)
		err := c.Queue.Finish(fctx, c.Info.Name, ref, r)
		cancel()
		if err == nil || errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrConflict) ||
			errors.Is(err, store.ErrNotFound) || time.Now().After(deadline) {
			return err
		}
		c.logf("%s %s: finish: %v; trying again", ref.Run, ref.Task, err)
		time.Sleep(c.Poll)
	}
}

func (c *Config) logf(format string, args ...any) {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	fmt.Fprintf(c.Log, format+"\n", args...)
}

// Test hook points (hook.go): just before a visit's Finish, and just after
// it committed.
const (
	hookBeforeVisit  = "before-visit"
	hookBeforeFinish = "before-finish"
	hookAfterFinish  = "after-finish"
	hookAfterExit    = "after-exit" // the runtime's: its task's process has exited (runtime.Options.AfterExit)
)
