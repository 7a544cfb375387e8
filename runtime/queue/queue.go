// Package queue is what pipec worker and pipec submit need of a shared
// store beyond store.Store: workers that register and heartbeat, runs handed
// to them with their DAG, tasks claimed under a lease, and the decisions of
// the failover model (internal/failover) taken in the same transactions
// that claim and finish a task, so no coordinator process exists to lose.
//
// The store keeps tokens, fencing and failover counts; the dispatch (who
// claims what) is a pull loop of pipec worker today. Another dispatch
// engine (Temporal workers running pipec tasks as activities) would call the
// same Claim and Finish.
package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/internal/failover"
	"github.com/pipec/pipec/runtime/exec"
	"github.com/pipec/pipec/runtime/store"
)

// WorkerInfo is what a worker says of itself when it registers.
type WorkerInfo struct {
	Name   string
	Host   string
	PID    int
	Slots  int
	Labels []string
	// Replaces is the pid of an earlier process of this name on this host
	// that the registering process saw is gone (a WorkerLiveError named
	// it): its registration is taken over without waiting for its lease.
	Replaces int
}

// WorkerLiveError is Register's refusal of a name a live worker holds.
type WorkerLiveError struct {
	Name, Host string
	PID        int
}

func (e *WorkerLiveError) Error() string {
	return fmt.Sprintf("register: worker %s is live already (host %s, pid %d): give another --name", e.Name, e.Host, e.PID)
}

// Registering decides a registration of w over the name's current row
// (found: there is one; host, pid and live as it says): refused while
// another live process holds the name, unless w replaces it; replacing says
// the claims held under the name belong to another process (the earlier
// one, killed or gone), so they expire now rather than be renewed by this
// process's heartbeat: a claim is its process's, not its name's.
func Registering(w WorkerInfo, found bool, host string, pid int, live bool) (replacing bool, err error) {
	if !found {
		return false, nil
	}
	other := host != w.Host || pid != w.PID
	if live && other && !(host == w.Host && w.Replaces != 0 && pid == w.Replaces) {
		return false, &WorkerLiveError{Name: w.Name, Host: host, PID: pid}
	}
	return other, nil
}

// Worker states.
const (
	WorkerLive     = "live"
	WorkerStopping = "stopping" // SIGTERM: no new claims, handing work back
	WorkerStopped  = "stopped"
)

// WorkerRow is one worker as pipec workers lists it.
type WorkerRow struct {
	WorkerInfo
	State    string
	Started  time.Time
	LastSeen time.Time
	// Ago is how long since it was last seen, on the store's clock.
	Ago time.Duration
	// Live: the worker's heartbeat is current on the store's clock.
	Live bool
	// Running lists the tasks it holds ("run task").
	Running []string
	// Failover lists, per task of an unfinished run, this worker's visits:
	// "orders/2024-01-01/r1 extract: 2 of 2".
	Failover []string
}

// Task is one task of a submitted run.
type Task struct {
	Name   string
	Needs  []string
	Limits failover.Limits
	// Labels are the worker labels the task requires (the plan's, sorted):
	// only a worker whose WorkerInfo.Labels include all of them
	// (failover.Eligible) may claim
	// it, and the failover model reasons over those workers alone.
	Labels []string
	// Pool is the plan's pool of the task ("" for none) and PoolSlots its
	// slots: a claim takes the task only while fewer of the pipeline's
	// tasks in that pool are claimed, across runs and workers (PoolFull).
	Pool      string
	PoolSlots int
}

// PlanTasks are the tasks of a compiled plan as Submit takes them: each
// with what it needs, its failover limits and its labels. Every way of
// submitting (pipec submit, backfills, due runs) builds them here, so none
// forgets a field.
func PlanTasks(p *compiler.Plan) []Task {
	slots := make(map[string]int, len(p.Pools))
	for _, pl := range p.Pools {
		slots[pl.Name] = pl.Slots
	}
	out := make([]Task, 0, len(p.Tasks))
	for i := range p.Tasks {
		t := &p.Tasks[i]
		out = append(out, Task{Name: t.Name, Needs: t.Needs, Limits: failover.PlanLimits(t, 0), Labels: t.Labels,
			Pool: t.Pool, PoolSlots: slots[t.Pool]})
	}
	return out
}

// Submission hands a run to the workers.
type Submission struct {
	Run store.NewRun
	// Plan is the compiled plan (its JSON); BaseDir the spec's folder,
	// where tasks run and relative sink paths resolve; Interval the value
	// the run's interval was given as.
	Plan     []byte
	BaseDir  string
	Interval string
	Tasks    []Task
}

// SubmittedRun is what Submit recorded of a run for its visits: the plan
// (JSON), the spec's folder, the interval as given, and whether the run
// reuses nothing from earlier runs (store.Run.Forced).
type SubmittedRun struct {
	Plan     []byte
	BaseDir  string
	Interval string
	Forced   bool
}

// Ref names a task of a run.
type Ref struct{ Run, Task string }

// Claim is a task a worker took; its run's plan comes from Submitted (a
// worker reads it once per run).
type Claim struct {
	Ref
	// AttemptBase is how many attempts the task made in the run before.
	AttemptBase int
	Limits      failover.Limits
	Failover    failover.State
	// Attempt is the visit's first attempt, started (queued, with its
	// token) in the claim's transaction by AttemptStarter.ClaimStarting;
	// nil from Claim, and then the visit starts it.
	Attempt *store.Attempt
	// Prior, when HasPrior, are the task's attempts on its resource (every
	// run of the interval, Attempt among them) as the claim's transaction
	// read them, by token: what the visit asks at its start
	// (store.Store.TaskAttempts), read without a round trip of its own.
	// Without HasPrior the visit reads them.
	Prior    []store.Attempt
	HasPrior bool
}

// AttemptStarter is a Queue that can start the claimed task's first attempt
// of the visit (as store.Store.StartAttempt, queued) in the claim's
// transaction: a transaction fewer per task. spec gives the worker, host
// and boot id; the run, task and resource are the claimed task's, and the
// lease is recorded when the attempt runs (MarkRunningAs). A worker uses it
// when its queue offers it, and hands back an attempt it did not use
// (Result.Unused).
type AttemptStarter interface {
	ClaimStarting(ctx context.Context, worker string, lease time.Duration, spec store.AttemptSpec) (*Claim, error)
}

// FinishClaimer is a Queue that records a visit's end and claims the
// worker's next task (as AttemptStarter.ClaimStarting) in one transaction:
// a commit fewer per task for a worker that goes on claiming.
type FinishClaimer interface {
	AttemptStarter
	// FinishClaiming is Finish, then ClaimStarting, committed together; nil
	// when there is nothing this worker may claim. When Finish would fail
	// it claims nothing and returns Finish's error (store.ErrLeaseLost
	// too, the attempt's end recorded as Finish records it).
	FinishClaiming(ctx context.Context, worker string, ref Ref, r Result, lease time.Duration, spec store.AttemptSpec) (*Claim, error)
}

// Ending is how a visit ended.
type Ending int

const (
	Succeeded  Ending = iota
	Failed            // the visit's attempts failed (the failover model decides what follows)
	HandedBack        // the worker gives the task back unrun or stopped: shutting down, or (Reason) it could not begin it; counts nowhere
	NotRun            // an input has no accepted version: the task cannot run anywhere
	// LeaseLost: the worker's lease on the task expired while it ran it
	// (it was paused, or cut off from the store) and it stopped the task,
	// or the state could not record the visit (Reason says so): the
	// worker's failure, counted as a lost lease, as when another worker's
	// sweep finds the claim expired (Expired).
	LeaseLost
)

// Result is a visit's outcome for Finish.
type Result struct {
	Ending        Ending
	Deterministic bool
	// Reason says why the visit ended so: for Succeeded, set only when it
	// ran nothing ("reused (succeeded in orders/2024-01-01/r1)"), as a
	// local run says it; kept as the task's reason for pipec submit --wait.
	Reason string
	// End, when set, is the end of the visit's last attempt, not yet
	// recorded: Finish records it exactly as store.Store.FinishAttempt
	// would, in the transaction that ends the visit and advances the DAG.
	// Both commit or neither does: a worker killed after the attempt's end
	// was recorded but before the DAG moved would leave the claim to expire
	// and the task to run again under a new token, although it succeeded.
	// When the claim is no longer the worker's, the attempt's end is still
	// recorded (its process did end) and Finish returns store.ErrLeaseLost.
	End *AttemptEnd
	// Unused is the claim's attempt (Claim.Attempt) when the visit never
	// ran it (an input missing, the plan unreadable, the worker stopping):
	// Finish ends it failed, class ClassNotStarted, as an attempt that
	// could not start; no process ever held its token. Only an
	// AttemptStarter's claims have one.
	Unused *store.AttemptRef
}

// ClassNotStarted is the class of a claim's attempt the visit never ran
// (Result.Unused); UnusedReason its error.
const (
	ClassNotStarted = "not_started"
	UnusedReason    = "the visit did not run it"
)

// UnusedOutcome is how a claim's attempt that the visit never ran ends:
// failed, class ClassNotStarted. Such an attempt fences nothing.
func UnusedOutcome() store.Outcome {
	return store.Outcome{State: store.AttemptFailed, Class: ClassNotStarted, ExitCode: -1, ErrorTail: UnusedReason}
}

// AttemptEnd is an attempt's end as store.Store.FinishAttempt takes it.
type AttemptEnd struct {
	Ref store.AttemptRef
	// Outcome.Was, when set, is the attempt as the visit's own writes left
	// it. A queue whose reads cost a round trip may also assume the claim
	// is still the worker's, guarded the same way.
	Outcome store.Outcome
}

// Work states.
const (
	WorkBlocked   = "blocked"
	WorkReady     = "ready"
	WorkClaimed   = "claimed"
	WorkSucceeded = "succeeded"
	WorkFailed    = "failed"
	WorkNotRun    = "not_run"
)

// TaskStatus is one task of a submitted run.
type TaskStatus struct {
	Task     string
	State    string
	Worker   string
	Reason   string
	Limits   failover.Limits
	Failover failover.State
}

// RunStatus is a submitted run as pipec submit --wait follows it.
type RunStatus struct {
	Run store.Run
	// Waiting says what the run waits for when no live worker may take one
	// of its tasks ("task extract: waiting for a worker: global count 3 of
	// 4"); empty otherwise.
	Waiting string
	Tasks   []TaskStatus
}

// Queue is the workers' side of a shared store.
type Queue interface {
	// Submit records the run (as store.CreateRun) and its tasks in one
	// transaction; tasks that need nothing are ready.
	Submit(ctx context.Context, s Submission) (store.Run, error)
	// Register makes the worker live for lease; a live worker of the same
	// name (another process) is refused.
	Register(ctx context.Context, w WorkerInfo, lease time.Duration) error
	// Heartbeat keeps the worker and its claims live for lease and returns
	// the claims it still holds: one missing was taken over (its lease
	// expired) and its task must stop here.
	Heartbeat(ctx context.Context, name string, lease time.Duration) ([]Ref, error)
	// Stopping marks the worker as shutting down (no more claims).
	Stopping(ctx context.Context, name string) error
	// Deregister marks the worker stopped.
	Deregister(ctx context.Context, name string) error
	// Sweep hands the claims whose lease expired to the failover model (a
	// lost worker) and returns how many.
	Sweep(ctx context.Context) (int, error)
	// Claim takes one ready task the model lets this worker start, or
	// returns nil.
	Claim(ctx context.Context, worker string, lease time.Duration) (*Claim, error)
	// Finish records how the worker's visit ended (and its last attempt's
	// end, Result.End) and advances the DAG (and finishes the run when
	// nothing is left) in one transaction. store.ErrLeaseLost when the
	// worker no longer holds the claim.
	Finish(ctx context.Context, worker string, ref Ref, r Result) error
	// Workers lists the workers, by name.
	Workers(ctx context.Context) ([]WorkerRow, error)
	// Submitted returns what Submit recorded of a run for its visits.
	Submitted(ctx context.Context, run string) (SubmittedRun, error)
	// Status returns a submitted run's state.
	Status(ctx context.Context, run string) (RunStatus, error)
	// Wakeups returns a channel that receives (without blocking the
	// sender, so wakeups coalesce) when tasks may have become ready, so
	// idle workers claim at once instead of at their next poll. It is
	// closed when ctx ends.
	Wakeups(ctx context.Context) (<-chan struct{}, error)
	// PoolSlots: pool slots held by visits another engine dispatches,
	// counted by Claim beside its claimed work rows.
	PoolSlots
}

// StatusFollower is a Queue that reads a run's status again and again
// cheaply (pipec submit --wait, at every poll).
type StatusFollower interface {
	// FollowStatus is Status, decoding only the tasks whose rows changed
	// since memo's last read of the run (StatusMemo), and on a store that
	// can tell which did, reading only those: the tasks it returns
	// may share their Failover.Visits maps with those of earlier reads,
	// and their slice may be the memo's (valid until its next read); they
	// are not to be modified.
	FollowStatus(ctx context.Context, run string, memo *StatusMemo) (RunStatus, error)
}

// RunEnds is a Queue that tells a follower when a run may have ended, so
// pipec submit --wait returns as the run ends rather than at its next look.
type RunEnds interface {
	// RunEnded returns a channel that receives (without blocking the
	// sender, so signals coalesce) when run may have ended, or with run
	// "" when any run may have (one listener for a batch). It is closed
	// when ctx ends, or when the store can no longer tell (a broken
	// connection): the follower's looks go on.
	RunEnded(ctx context.Context, run string) (<-chan struct{}, error)
}

// NormalLabels is labels sorted, without duplicates or empty strings, never
// nil: the form stores keep and compare.
func NormalLabels(labels []string) []string {
	out := make([]string, 0, len(labels))
	for _, l := range labels {
		if l != "" {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// WaitingMessage is what a run says while its task waits for a worker
// (RunStatus.Waiting, the run.waiting event, pipec submit --wait), the same
// for every store and for pipec simulate (failover.WaitingFor): "task
// extract: waiting for a worker with labels spark: global count 3 of 4", or
// "task extract: waiting for a worker with labels spark (none is live)" when
// no live worker offers the labels (noneLive).
func WaitingMessage(task string, labels []string, l failover.Limits, st *failover.State, noneLive bool) string {
	return WaitingPrefix(task) + failover.WaitingFor(labels, l, st, noneLive)
}

// WaitingPrefix is how every WaitingMessage of task begins: a store replaces
// a run's waiting message only by one about the same task (or when it has
// none), so workers seeing different waiting tasks do not overwrite each
// other's in turn.
func WaitingPrefix(task string) string { return "task " + task + ": " }

// ErrNotHandedBack is a worker's error when it stopped without handing its
// tasks back because its state did not answer (past a lease and its tasks'
// kill grace, as a killed worker would have): their claims expire after
// the lease. Connections to the state may still wait on it, so the state
// is not closed (the process's exit closes them).
var ErrNotHandedBack = errors.New("stopped without handing its tasks back: the state does not answer")

// StopWaits is how long a stopping worker waits for its tasks while its
// state does not answer (ErrNotHandedBack): a lease, and the kill grace
// its tasks get to stop (exec.DefaultKillGrace when 0).
func StopWaits(lease, killGrace time.Duration) time.Duration {
	if killGrace <= 0 {
		killGrace = exec.DefaultKillGrace
	}
	return lease + killGrace
}

// Bound bounds one call of a worker to its state by the worker's lease. A
// state that has not answered within a lease is unreachable as far as the
// claims go (they expire by then), and a call that hangs (a server that
// stopped answering, its connection open) must not keep a worker from
// seeing that, stopping its tasks, or stopping when told to. pgx gives up a
// call whose context ends by closing its connection.
func Bound(ctx context.Context, lease time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, lease)
}
