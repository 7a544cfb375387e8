package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/pipec/pipec/runtime/exec"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// WorkerConfig configures a pipec worker on Temporal.
type WorkerConfig struct {
	Info   queue.WorkerInfo
	Store  store.Store
	Queue  queue.Queue
	Client client.Client
	// As worker.Config's fields of the same names.
	Workdir, Artifacts, DefaultArtifacts, ServerState string
	Environ                                           []string
	// Lease is the worker's registration lease in the state (10s when 0),
	// renewed every Lease/5.
	Lease                           time.Duration
	TaskLease, LeasePoll, KillGrace time.Duration
	// Unreachable is how long the worker goes on running its visits while
	// it cannot reach Temporal (DefaultHeartbeat when 0): past it, Temporal
	// has timed them out and started them elsewhere, so they are stopped,
	// as visits whose lease was lost.
	Unreachable time.Duration
	Log         io.Writer
}

// Register registers the workflow and activities of a with w.
func Register(w worker.Registry, a *Activities) {
	w.RegisterWorkflowWithOptions(RunWorkflow, workflow.RegisterOptions{Name: WorkflowName})
	registerActivities(w, a)
}

func registerActivities(w worker.Registry, a *Activities) {
	w.RegisterActivityWithOptions(a.Visit, activity.RegisterOptions{Name: ActivityVisit})
	w.RegisterActivityWithOptions(a.Visits, activity.RegisterOptions{Name: ActivityVisits})
	w.RegisterActivityWithOptions(a.LiveWorkers, activity.RegisterOptions{Name: ActivityLive})
	w.RegisterActivityWithOptions(a.EndRun, activity.RegisterOptions{Name: ActivityEndRun})
	w.RegisterActivityWithOptions(a.Lost, activity.RegisterOptions{Name: ActivityLost})
	w.RegisterActivityWithOptions(a.LostInBatch, activity.RegisterOptions{Name: ActivityLostInBatch})
	w.RegisterActivityWithOptions(a.Notes, activity.RegisterOptions{Name: ActivityNotes})
}

// labelSets are the sets of labels whose tasks a worker offering labels
// may run: every subset (at most 2^6 of them; more labels than that are
// refused).
func labelSets(labels []string) ([][]string, error) {
	labels = queue.NormalLabels(labels)
	if len(labels) > 6 {
		return nil, fmt.Errorf("a worker on Temporal offers at most 6 labels (one task queue per set of them), not %d", len(labels))
	}
	var out [][]string
	for m := 0; m < 1<<len(labels); m++ {
		var s []string
		for i, l := range labels {
			if m&(1<<i) != 0 {
				s = append(s, l)
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) < len(out[j]) })
	return out, nil
}

// RunWorker registers the worker in the state, polls Temporal (the
// workflows, the queues of its label sets and its own queue) until ctx
// ends, then stops gracefully: its visits are handed back, uncounted.
func RunWorker(ctx context.Context, c WorkerConfig) error {
	if c.Info.Name == "" || c.Store == nil || c.Queue == nil || c.Client == nil || c.Workdir == "" {
		return errors.New("worker: a name, a store, a queue, a Temporal client and a workdir are required")
	}
	if c.Info.Slots <= 0 {
		c.Info.Slots = 1
	}
	if c.Lease <= 0 {
		c.Lease = 10 * time.Second
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	own := queue.NormalLabels(c.Info.Labels)
	sets, err := labelSets(own)
	if err != nil {
		return err
	}
	info := c.Info
	info.Labels = queue.NormalLabels(append(append([]string(nil), own...), EngineLabel))
	self, _ := exec.Self()
	self = testIdentity(self)
	a := &Activities{Name: c.Info.Name, Store: c.Store, Queue: c.Queue, Client: c.Client, Workdir: c.Workdir,
		Artifacts: c.Artifacts, DefaultArtifacts: c.DefaultArtifacts, ServerState: c.ServerState, Environ: c.Environ,
		TaskLease: c.TaskLease, LeasePoll: c.LeasePoll, KillGrace: c.KillGrace, RunLease: 3 * c.Lease, Log: c.Log, Self: self,
		slots: make(chan struct{}, c.Info.Slots)}
	bg := context.WithoutCancel(ctx)
	// The attempts' folders in its workdir are its state's alone, as a
	// pipec worker's (store.ClaimScratch).
	id, err := c.Store.StateID(ctx)
	if err == nil {
		err = store.ClaimScratch(c.Workdir, id, c.ServerState)
	}
	if err != nil {
		return fmt.Errorf("worker %s: %w", c.Info.Name, err)
	}
	// Its state's queues only (Names).
	names := Names{State: id}
	if err := c.register(bg, info); err != nil {
		return err
	}
	a.logf("worker %s registered on %s (host %s, pid %d, slots %d, labels %s)", info.Name, "Temporal", info.Host, info.PID,
		info.Slots, strings.Join(info.Labels, ","))

	opts := worker.Options{MaxConcurrentActivityExecutionSize: c.Info.Slots, WorkerStopTimeout: 30 * time.Second,
		Identity: info.Name + "@" + info.Host}
	var ws []worker.Worker
	// The workflows' queue is also the queue of tasks without labels.
	wf := worker.New(c.Client, names.WorkflowQueue(), opts)
	Register(wf, a)
	ws = append(ws, wf)
	for _, s := range sets {
		if len(s) == 0 {
			continue
		}
		w := worker.New(c.Client, names.TasksQueue(s), opts)
		registerActivities(w, a)
		ws = append(ws, w)
	}
	state := worker.New(c.Client, names.StateQueue(), worker.Options{WorkerStopTimeout: opts.WorkerStopTimeout, Identity: opts.Identity})
	state.RegisterActivityWithOptions(a.Lost, activity.RegisterOptions{Name: ActivityLost})
	state.RegisterActivityWithOptions(a.LostInBatch, activity.RegisterOptions{Name: ActivityLostInBatch})
	ws = append(ws, state)
	mine := worker.New(c.Client, names.WorkerQueue(info.Name), opts)
	registerActivities(mine, a)
	ws = append(ws, mine)
	var started []worker.Worker
	for _, w := range ws {
		if err := w.Start(); err != nil {
			for _, s := range started {
				s.Stop()
			}
			_ = c.Queue.Deregister(bg, info.Name)
			return fmt.Errorf("worker: polling Temporal: %w", err)
		}
		started = append(started, w)
	}

	poll := max(c.Lease/5, 20*time.Millisecond)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	outage := false
	if c.Unreachable <= 0 {
		c.Unreachable = DefaultHeartbeat
	}
	lastTemporal, cutOff := time.Now(), false
	// Each call to the state is bounded by a lease (queue.Bound): a server
	// that stopped answering must not keep this loop from its heartbeats
	// to Temporal's health, or from stopping when told to.
	call := func(f func(context.Context) error) error {
		sctx, cancel := queue.Bound(bg, c.Lease)
		defer cancel()
		return f(sctx)
	}
	for {
		select {
		case <-ctx.Done():
			_ = call(func(ctx context.Context) error { return c.Queue.Stopping(ctx, info.Name) })
			a.logf("worker %s stopping: handing back its tasks", info.Name)
			// Keep the registration live while the visits stop.
			stopped := make(chan struct{})
			go func() {
				for i := len(started) - 1; i >= 0; i-- {
					started[i].Stop()
				}
				close(stopped)
			}()
			// Visits that wait on a state that does not answer are not
			// waited for forever (queue.ErrNotHandedBack).
			giveUp := time.Now().Add(queue.StopWaits(c.Lease, c.KillGrace))
			for {
				select {
				case <-stopped:
					if err := call(func(ctx context.Context) error { return c.Queue.Deregister(ctx, info.Name) }); err != nil {
						return err
					}
					a.logf("worker %s stopped", info.Name)
					return nil
				case <-tick.C:
					err := call(func(ctx context.Context) error {
						_, err := c.Queue.Heartbeat(ctx, info.Name, c.Lease)
						return err
					})
					if err != nil && time.Now().After(giveUp) {
						a.logf("worker %s stopped without handing its tasks back: the state does not answer (%v); their visits time out on Temporal", info.Name, err)
						return queue.ErrNotHandedBack
					}
				}
			}
		case <-tick.C:
			err := call(func(ctx context.Context) error {
				_, err := c.Queue.Heartbeat(ctx, info.Name, c.Lease)
				if errors.Is(err, store.ErrNotFound) {
					err = c.register(ctx, info)
				}
				return err
			})
			if err != nil {
				if !outage {
					outage = true
					a.logf("heartbeat: %v; the state is unreachable, trying again every %s", err, poll)
				}
				continue
			}
			if outage {
				outage = false
				a.logf("the state is reachable again")
			}
			// What a queue worker's beat does besides: attempts whose
			// lease expired (a worker killed mid-task) become unknown.
			if err := call(func(ctx context.Context) error { _, err := c.Store.MarkUnknown(ctx); return err }); err != nil {
				a.logf("mark unknown: %v", err)
			}
			_ = call(func(ctx context.Context) error { a.renewRuns(ctx); return nil })
			hctx, cancel := context.WithTimeout(bg, max(poll, time.Second))
			_, herr := c.Client.CheckHealth(hctx, &client.CheckHealthRequest{})
			cancel()
			switch {
			case herr == nil:
				if cutOff {
					a.logf("Temporal is reachable again")
				}
				lastTemporal, cutOff = time.Now(), false
			case time.Since(lastTemporal) > c.Unreachable && !cutOff:
				cutOff = true
				n := a.stopAll(errUnreachable)
				a.logf("Temporal unreachable for %s (%v): stopping %d visit(s)", c.Unreachable, herr, n)
			}
		}
	}
}

func (c *WorkerConfig) register(ctx context.Context, info queue.WorkerInfo) error {
	err := c.Queue.Register(ctx, info, c.Lease)
	var live *queue.WorkerLiveError
	if errors.As(err, &live) && live.Host == info.Host && live.PID != info.PID && !exec.Alive(live.PID) {
		info.Replaces = live.PID
		err = c.Queue.Register(ctx, info, c.Lease)
	}
	return err
}
