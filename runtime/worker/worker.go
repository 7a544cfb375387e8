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
//     tasks and goes on claiming.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
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
}

// visit is one task this worker runs.
type visit struct {
	cl     *queue.Claim
	cancel context.CancelCauseFunc
}

// errShutdown cancels visits when the worker stops gracefully; errTakenOver
// when a heartbeat says the claim is another worker's now.
var (
	errShutdown  = errors.New("the worker is shutting down")
	errTakenOver = errors.New("the claim's lease expired and another worker took the task over")
)

// Run runs the worker until ctx is cancelled (a graceful stop: running tasks
// are stopped and handed back, uncounted) or the store fails for longer
// than a lease.
func Run(ctx context.Context, c Config) error {
	if c.Info.Name == "" || c.Store == nil || c.Queue == nil || c.Workdir == "" {
		return errors.New("worker: a name, a store, a queue and a workdir are required")
	}
	if c.Info.Slots <= 0 {
		c.Info.Slots = 1
	}
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
	bg := context.WithoutCancel(ctx)
	if err := c.Queue.Register(bg, c.Info, c.Lease); err != nil {
		return err
	}
	c.logf("worker %s registered (host %s, pid %d, slots %d)", c.Info.Name, c.Info.Host, c.Info.PID, c.Info.Slots)

	var wg sync.WaitGroup
	var mu sync.Mutex
	visits := map[queue.Ref]*visit{}
	ended := make(chan queue.Ref, c.Info.Slots)
	tick := time.NewTicker(c.Poll)
	defer tick.Stop()
	lastOK := time.Now()
	for {
		held, err := c.Queue.Heartbeat(bg, c.Info.Name, c.Lease)
		switch {
		case errors.Is(err, store.ErrNotFound):
			// Deregistered under us (a name reused after we were stopped):
			// register again.
			err = c.Queue.Register(bg, c.Info, c.Lease)
		case err == nil:
			lastOK = time.Now()
			holds := map[queue.Ref]bool{}
			for _, r := range held {
				holds[r] = true
			}
			mu.Lock()
			for ref, v := range visits {
				if !holds[ref] {
					c.logf("%s %s: lost its lease here (taken over); stopping it", ref.Run, ref.Task)
					v.cancel(errTakenOver)
				}
			}
			mu.Unlock()
		}
		if err != nil {
			c.logf("heartbeat: %v", err)
			if time.Since(lastOK) > c.Lease {
				// The claims are someone else's by now; stop everything.
				mu.Lock()
				for _, v := range visits {
					v.cancel(errTakenOver)
				}
				mu.Unlock()
				wg.Wait()
				return fmt.Errorf("worker %s: the store is unreachable: %w", c.Info.Name, err)
			}
		}
		if err == nil && ctx.Err() == nil {
			if _, err := c.Queue.Sweep(bg); err != nil {
				c.logf("sweep: %v", err)
			}
			if _, err := c.Store.MarkUnknown(bg); err != nil {
				c.logf("mark unknown: %v", err)
			}
			for {
				mu.Lock()
				free := len(visits) < c.Info.Slots
				mu.Unlock()
				if !free || ctx.Err() != nil {
					break
				}
				cl, err := c.Queue.Claim(bg, c.Info.Name, c.Lease)
				if err != nil {
					c.logf("claim: %v", err)
					break
				}
				if cl == nil {
					break
				}
				vctx, cancel := context.WithCancelCause(bg)
				v := &visit{cl: cl, cancel: cancel}
				mu.Lock()
				visits[cl.Ref] = v
				mu.Unlock()
				c.logf("%s %s: start %d on %s (%s)", cl.Run, cl.Task, cl.Failover.Starts, c.Info.Name, cl.Failover.Describe(cl.Limits, nil))
				wg.Add(1)
				go func() {
					defer wg.Done()
					c.runVisit(vctx, v)
					ended <- cl.Ref
				}()
			}
		}
		select {
		case <-ctx.Done():
			return c.shutdown(bg, &mu, visits, &wg)
		case ref := <-ended:
			mu.Lock()
			delete(visits, ref)
			mu.Unlock()
		case <-tick.C:
		}
	}
}

// shutdown is the graceful stop: no more claims, running tasks stopped and
// handed back, then the worker is deregistered.
func (c *Config) shutdown(ctx context.Context, mu *sync.Mutex, visits map[queue.Ref]*visit, wg *sync.WaitGroup) error {
	if err := c.Queue.Stopping(ctx, c.Info.Name); err != nil {
		c.logf("stopping: %v", err)
	}
	mu.Lock()
	n := len(visits)
	for _, v := range visits {
		v.cancel(errShutdown)
	}
	mu.Unlock()
	c.logf("worker %s stopping: handing back %d task(s)", c.Info.Name, n)
	// Keep the claims alive while the tasks stop, so none expires into a
	// counted failover.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTicker(c.Poll)
	defer t.Stop()
	for {
		select {
		case <-done:
			if err := c.Queue.Deregister(ctx, c.Info.Name); err != nil {
				return err
			}
			c.logf("worker %s stopped", c.Info.Name)
			return nil
		case <-t.C:
			_, _ = c.Queue.Heartbeat(ctx, c.Info.Name, c.Lease)
		}
	}
}

// runVisit runs one claimed task and reports how it ended.
func (c *Config) runVisit(ctx context.Context, v *visit) {
	cl := v.cl
	bg := context.WithoutCancel(ctx)
	finish := func(r queue.Result) {
		err := c.Queue.Finish(bg, c.Info.Name, cl.Ref, r)
		switch {
		case errors.Is(err, store.ErrLeaseLost):
			c.logf("%s %s: its outcome is not this worker's to report any more (taken over)", cl.Run, cl.Task)
		case err != nil:
			c.logf("%s %s: finish: %v", cl.Run, cl.Task, err)
		}
	}
	var plan compiler.Plan
	if err := json.Unmarshal(cl.Plan, &plan); err != nil {
		finish(queue.Result{Ending: queue.Failed, Deterministic: true, Reason: "the submitted plan does not decode: " + err.Error()})
		return
	}
	env := append(append([]string(nil), c.Environ...), "PIPEC_WORKER="+c.Info.Name)
	res, err := runtime.RunVisit(ctx, runtime.Visit{
		Options: runtime.Options{Plan: &plan, BaseDir: cl.BaseDir, Interval: cl.Interval, Store: c.Store,
			StatePath: filepath.Join(c.Workdir, "state"), Environ: env, Worker: c.Info.Name,
			DefaultLease: c.TaskLease, LeasePoll: c.LeasePoll, KillGrace: c.KillGrace},
		Run: cl.Run, Task: cl.Task, AttemptBase: cl.AttemptBase})
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errShutdown):
		c.logf("%s %s: handed back", cl.Run, cl.Task)
		finish(queue.Result{Ending: queue.HandedBack})
	case errors.Is(cause, errTakenOver) || res.LeaseLost:
		c.logf("%s %s: stopped here, another worker has it", cl.Run, cl.Task)
		finish(queue.Result{Ending: queue.Failed, Reason: "its lease expired"}) // refused unless still ours
	case err != nil:
		finish(queue.Result{Ending: queue.Failed, Deterministic: true, Reason: err.Error()})
	case res.Task.State == runtime.TaskSucceeded:
		c.logf("%s %s: succeeded on %s", cl.Run, cl.Task, c.Info.Name)
		finish(queue.Result{Ending: queue.Succeeded})
	case res.Task.State == runtime.TaskNotRun:
		c.logf("%s %s: not run: %s", cl.Run, cl.Task, res.Task.Reason)
		finish(queue.Result{Ending: queue.NotRun, Reason: res.Task.Reason})
	default:
		why := res.Task.Reason
		if res.Task.Class != "" {
			why = res.Task.Class + ": " + why
		}
		c.logf("%s %s: failed on %s (%s)", cl.Run, cl.Task, c.Info.Name, why)
		finish(queue.Result{Ending: queue.Failed, Deterministic: res.Deterministic, Reason: why})
	}
}

func (c *Config) logf(format string, args ...any) {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	fmt.Fprintf(c.Log, format+"\n", args...)
}
