package queue

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/pipec/pipec/internal/failover"
	"github.com/pipec/pipec/runtime/store"
)

// The decisions of a queue, written once: which tasks a submission makes
// ready, which ready task a worker claims, what a visit's end does to its
// task, how a failure spreads downstream, when a run ends and what it says
// while it waits for a worker. They are pure functions over plain structs;
// every store (SQLite, PostgreSQL) reads its rows into these structs, calls
// them inside its transaction and writes back what they decided, so the
// stores cannot disagree. Only the locking (SKIP LOCKED, BEGIN IMMEDIATE)
// and the SQL differ.

// Events a queue records in a run's log.
const (
	EventRunSubmitted   = "run.submitted"
	EventWorkClaimed    = "work.claimed"
	EventWorkFailover   = "work.failover"
	EventWorkStopped    = "work.stopped"
	EventWorkHandedBack = "work.handed_back"
	EventWorkLeaseLost  = "work.lease_lost"
	EventWorkSucceeded  = "work.succeeded"
	EventWorkNotRun     = "work.not_run"
	EventRunWaiting     = "run.waiting"
)

// ClaimCandidates bounds how many ready tasks one claim looks at.
const ClaimCandidates = 64

// NewWork is a task's first row, as Plan decides it.
type NewWork struct {
	Task string
	// State is WorkReady for a task that needs nothing, else WorkBlocked.
	State string
	// WaitingOn is how many tasks it needs (each success lowers it).
	WaitingOn int
	// Dependents are the tasks that need it, sorted.
	Dependents []string
	Limits     failover.Limits
	// Labels are the worker labels it requires (NormalLabels).
	Labels []string
	// Pool is its pool's PoolKey ("" for none), PoolSlots its slots.
	Pool      string
	PoolSlots int
}

// Plan checks a submission's DAG and returns each task's first row, in the
// submission's order: a submission without tasks, or with a task that needs
// one the plan does not have, is refused.
func Plan(sub Submission) ([]NewWork, error) {
	if len(sub.Tasks) == 0 {
		return nil, fmt.Errorf("submit: the plan has no tasks")
	}
	known := make(map[string]bool, len(sub.Tasks))
	for _, t := range sub.Tasks {
		if known[t.Name] {
			return nil, fmt.Errorf("submit: task %s is in the plan twice", t.Name)
		}
		known[t.Name] = true
	}
	dependents := map[string][]string{}
	for _, t := range sub.Tasks {
		for _, n := range t.Needs {
			if !known[n] {
				return nil, fmt.Errorf("submit: task %s needs %s, which the plan does not have", t.Name, n)
			}
			dependents[n] = append(dependents[n], t.Name)
		}
	}
	out := make([]NewWork, len(sub.Tasks))
	for i, t := range sub.Tasks {
		deps := dependents[t.Name]
		sort.Strings(deps)
		if deps == nil {
			deps = []string{}
		}
		state := WorkBlocked
		if len(t.Needs) == 0 {
			state = WorkReady
		}
		out[i] = NewWork{Task: t.Name, State: state, WaitingOn: len(t.Needs), Dependents: deps, Limits: t.Limits,
			Labels: NormalLabels(t.Labels), Pool: PoolKey(sub.Run.Pipeline, t.Pool), PoolSlots: t.PoolSlots}
	}
	return out, nil
}

// Work is one task's row as the decisions read it.
type Work struct {
	Ref
	Limits     failover.Limits
	Failover   failover.State
	Dependents []string
	// Worker holds the claim (a claimed task).
	Worker string
	// Labels are the worker labels the task requires (sorted).
	Labels []string
	// Live are, for a claim, the live workers that offer the task's labels
	// (failover.Eligible), by name: the workers the failover model reasons
	// over for this task.
	Live []string
	// Pool is the task's PoolKey ("" for none) and PoolSlots its slots;
	// for a claim, PoolBusy is how many of the pipeline's tasks in the
	// pool are claimed now, and PoolLocked says another claim is deciding
	// about the pool at this moment (PostgreSQL), so this one passes the
	// task over as SKIP LOCKED passes over a locked row.
	Pool       string
	PoolSlots  int
	PoolBusy   int
	PoolLocked bool
}

// Waiting is what one run waits for: Message (WaitingMessage) is about
// Task.
type Waiting struct {
	Run, Task, Message string
}

// Candidates are the ready tasks a claim read so far, page after page in
// order, and what Choose decided of them: pages chosen from in turn decide
// exactly what one slice of them all would.
type Candidates struct {
	Work []Work
	Pick Pick
}

// NewCandidates starts a claim's candidates: none read, none chosen.
func NewCandidates() *Candidates { return &Candidates{Pick: Pick{Chosen: -1}} }

// Judge chooses from the next page (Choose), keeping what waits, and
// reports whether a candidate is chosen.
func (c *Candidates) Judge(page []Work, worker string) (bool, error) {
	p, err := Choose(page, worker)
	if err != nil {
		return false, err
	}
	c.Pick.Waiting = MergeWaiting(c.Pick.Waiting, p.Waiting)
	if p.Chosen >= 0 {
		c.Pick.Chosen = len(c.Work) + p.Chosen
	}
	c.Work = append(c.Work, page...)
	return c.Pick.Chosen >= 0, nil
}

// Pick is what a claim decided.
type Pick struct {
	// Chosen indexes the candidate to claim (its Failover already stepped
	// by the start), -1 for none.
	Chosen int
	// Waiting lists, by run, what runs wait for: the first task (of the
	// candidates before the chosen one) that none of its live workers may
	// start, or, after Unserved, a labelled task no live worker offers the
	// labels of. A store sets a run's message only when it has none or one
	// about the same task (WaitingPrefix), and clears it on a claim of that
	// task.
	Waiting []Waiting
}

// Choose picks, among ready candidates in the order the store reads them
// (by run, then task), the first the failover model lets worker start among
// the candidate's Live workers. A candidate whose Live lacks worker (it does
// not offer the task's labels, or is not live itself: stopping, or its
// heartbeat lapsed) is passed over, and so is one whose pool has no free
// slot (PoolFull: its run waits for a slot in the pool) or is locked by
// another claim.
func Choose(cands []Work, worker string) (Pick, error) {
	p := Pick{Chosen: -1}
	for i := range cands {
		c := &cands[i]
		if !slices.Contains(c.Live, worker) || c.PoolLocked {
			continue
		}
		if PoolFull(c) {
			p.wait(c.Run, c.Task, PoolWaitingMessage(c))
			continue
		}
		if !c.Failover.CanStart(c.Limits, worker, c.Live) {
			if c.Failover.Waiting(c.Limits, c.Live) {
				p.wait(c.Run, c.Task, WaitingMessage(c.Task, c.Labels, c.Limits, &c.Failover, false))
			}
			continue
		}
		if err := c.Failover.Start(c.Limits, worker, c.Live); err != nil {
			return p, err
		}
		p.Chosen = i
		break
	}
	return p, nil
}

// Unserved adds to a claim that chose nothing, for runs not waiting yet,
// the ready labelled tasks that no live worker offers the labels of (their
// Live empty): "waiting for a worker with labels spark (none is live)".
func (p *Pick) Unserved(ready []Work) {
	for i := range ready {
		if c := &ready[i]; len(c.Labels) > 0 && len(c.Live) == 0 {
			p.wait(c.Run, c.Task, WaitingMessage(c.Task, c.Labels, failover.Limits{}, nil, true))
		}
	}
}

// MergeWaiting adds to a the runs of b that a lacks (b being what Choose
// decided of later candidates), sorted by run: Choose over candidates read
// a page at a time decides what it would over all of them at once.
func MergeWaiting(a, b []Waiting) []Waiting {
	p := Pick{Waiting: a}
	for _, w := range b {
		p.wait(w.Run, w.Task, w.Message)
	}
	return p.Waiting
}

// wait records the run's first waiting task, keeping Waiting sorted by run.
func (p *Pick) wait(run, task, msg string) {
	i, found := slices.BinarySearchFunc(p.Waiting, run, func(w Waiting, run string) int { return strings.Compare(w.Run, run) })
	if !found {
		p.Waiting = slices.Insert(p.Waiting, i, Waiting{Run: run, Task: task, Message: msg})
	}
}

// ClaimedPayload is the work.claimed event of a claim Choose decided.
func ClaimedPayload(c *Work, worker string) map[string]any {
	return map[string]any{"worker": worker, "start": c.Failover.Starts, "counts": c.Failover.Describe(c.Limits, c.Live)}
}

// EligibleLive returns, by name, the live workers that offer the labels a
// task requires (failover.Eligible): a store that reads the live workers
// with their labels fills Work.Live with it.
func EligibleLive(required []string, live []WorkerInfo) []string {
	out := []string{}
	for _, w := range live {
		if failover.Eligible(required, w.Labels) {
			out = append(out, w.Name)
		}
	}
	return out
}

// Note is an event to record in the task's run.
type Note struct {
	Kind    string
	Payload map[string]any
}

// Spread values: how the task whose failure spreads ended.
const (
	SpreadFailed = "failed"
	SpreadNotRun = "was not run"
)

// Change is what the end of a visit (or the expiry of its claim) does to
// its task. The store writes State, Reason and the stepped Failover to the
// task's row (clearing its worker when it is ready again), records Notes in
// order, then, on Advance, lowers its dependents' counts (ready at none),
// or, with Spread set, marks downstream not run (see Spread). With Unknown
// set it also marks the task's unfinished (queued or running) attempts
// unknown, with Unknown as the reason.
type Change struct {
	State   string
	Reason  string
	Notes   []Note
	Advance bool
	Spread  string
	Unknown string
}

// UnknownClaimExpired is why a swept claim's unfinished attempts become
// unknown: whatever its worker's process did is unknown now, as an attempt
// whose lease expired is. An attempt still queued (its process ended before
// its start was recorded, which its end would have recorded) would
// otherwise stay queued for good.
const UnknownClaimExpired = "its worker's claim expired"

// Finished decides what a visit's end does to the task w (worker held its
// claim); w.Failover is stepped.
func Finished(w *Work, worker string, r Result) (Change, error) {
	switch r.Ending {
	case Succeeded:
		c := Success(worker)
		c.Reason = r.Reason
		return c, nil
	case NotRun:
		return Change{State: WorkNotRun, Reason: r.Reason, Spread: SpreadNotRun}, nil
	case HandedBack:
		w.Failover.ShutDown(w.Limits)
		why := r.Reason
		if why == "" {
			why = "shutting down"
		}
		return Change{State: WorkReady, Reason: "handed back by " + worker + " (" + why + ")",
			Notes: []Note{{EventWorkHandedBack, map[string]any{"worker": worker, "counts": w.Failover.Describe(w.Limits, nil)}}}}, nil
	case Failed:
		return failedVisit(w, worker, w.Failover.Failed(w.Limits, false, r.Deterministic), r.Reason), nil
	case LeaseLost:
		why := r.Reason
		if why == "" {
			why = "the lease of " + worker + " expired while it ran the task (paused or cut off from the store)"
		}
		return lostLease(w, worker, why), nil
	}
	return Change{}, fmt.Errorf("finish: unknown ending %d", r.Ending)
}

// Success is what a succeeded visit does to its task, whatever the task's
// row holds: the DAG advances, the failover state stays. A queue may write
// it without reading the row first (see store.Outcome.Was).
func Success(worker string) Change {
	return Change{State: WorkSucceeded, Advance: true,
		Notes: []Note{{EventWorkSucceeded, map[string]any{"worker": worker}}}}
}

// Expired decides what the expiry of w's claim does: its worker stopped
// renewing (SIGSTOP, SIGKILL, a partition), which the model sees as a lost
// lease; w.Failover is stepped.
func Expired(w *Work) Change {
	c := lostLease(w, w.Worker, "the lease of "+w.Worker+" expired (no heartbeat): its attempt is unknown")
	c.Unknown = UnknownClaimExpired
	return c
}

// lostLease is what a lease lost by worker does to w, whoever noticed it
// (another worker's sweep, or the worker itself on waking up): the
// worker's failure, not the task's, counted as the failover model counts a
// lost lease (failover.State.LeaseLost).
func lostLease(w *Work, worker, reason string) Change {
	c := failedVisit(w, worker, w.Failover.LeaseLost(w.Limits), reason)
	c.Notes = append([]Note{{EventWorkLeaseLost, map[string]any{"worker": worker}}}, c.Notes...)
	return c
}

// failedVisit applies the model's decision after a visit ended without
// success (it failed, or its lease was lost).
func failedVisit(w *Work, worker string, next failover.Next, reason string) Change {
	if next != failover.Stop {
		return Change{State: WorkReady, Reason: reason, Notes: []Note{{EventWorkFailover, map[string]any{
			"from": worker, "reason": reason, "counts": w.Failover.Describe(w.Limits, nil)}}}}
	}
	why := reason
	if why == "" {
		why = "failed"
	}
	if l := w.Limits; !l.NoFailover && l.Global != failover.NoLimit && w.Failover.Failovers+1 > l.Global {
		why += fmt.Sprintf("; stopped: another failover would exceed global = %d", l.Global)
	}
	return Change{State: WorkFailed, Reason: why, Spread: SpreadFailed, Notes: []Note{{EventWorkStopped, map[string]any{
		"worker": worker, "reason": why, "counts": w.Failover.Describe(w.Limits, nil)}}}}
}

// Marker marks a blocked task of the run not run, with why (recording a
// work.not_run event), and returns its dependents; ok is false when the
// task was not blocked (already not run through another path).
type Marker func(task, why string) (dependents []string, ok bool, err error)

// Spread marks every task downstream of from (whose dependents are given,
// and which ended as how: SpreadFailed or SpreadNotRun) not run, breadth
// first, with the reason a local run gives: "needs extract, which failed",
// then "needs clean, which was not run".
func Spread(from string, dependents []string, how string, mark Marker) error {
	type item struct{ task, cause string }
	todo := make([]item, 0, len(dependents))
	for _, d := range dependents {
		todo = append(todo, item{d, from})
	}
	for len(todo) > 0 {
		it := todo[0]
		todo = todo[1:]
		why := fmt.Sprintf("needs %s, which %s", it.cause, how)
		if it.cause != from {
			why = fmt.Sprintf("needs %s, which was not run", it.cause)
		}
		next, ok, err := mark(it.task, why)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		for _, d := range next {
			todo = append(todo, item{d, it.task})
		}
	}
	return nil
}

// UnknownPayload is the attempt.unknown event of an attempt a Change with
// Unknown marked.
func UnknownPayload(token int64, reason string) map[string]any {
	return map[string]any{"token": token, "reason": reason}
}

// NotRunPayload is the work.not_run event of a task Spread marked.
func NotRunPayload(why string) map[string]any { return map[string]any{"reason": why} }

// RunEnd says whether a run whose tasks are counted (open: blocked, ready
// or claimed; bad: failed or not run) is over, and how: failed when any
// task failed or was not run.
func RunEnd(open, bad int) (store.RunState, bool) {
	switch {
	case open > 0:
		return store.RunRunning, false
	case bad > 0:
		return store.RunFailed, true
	}
	return store.RunSucceeded, true
}

// RunTask is one task of an unfinished run, for AttachWork.
type RunTask struct {
	Run string
	TaskStatus
}

// AttachWork fills in the workers' Running (the tasks each holds) and
// Failover lines ("orders/2024-01-01/r1 extract: 2 of 2", each worker's
// visits per task) from the tasks of unfinished runs, given by run and task.
func AttachWork(ws []WorkerRow, work []RunTask) {
	byName := make(map[string]*WorkerRow, len(ws))
	for i := range ws {
		byName[ws[i].Name] = &ws[i]
	}
	for _, x := range work {
		if w := byName[x.Worker]; w != nil && x.State == WorkClaimed {
			w.Running = append(w.Running, x.Run+" "+x.Task)
		}
		if x.Limits.NoFailover {
			continue
		}
		names := make([]string, 0, len(x.Failover.Visits))
		for name := range x.Failover.Visits {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			w := byName[name]
			if w == nil {
				continue
			}
			of := "unlimited"
			if x.Limits.PerWorker > 0 {
				of = fmt.Sprint(x.Limits.PerWorker)
			}
			w.Failover = append(w.Failover, fmt.Sprintf("%s %s: %d of %s", x.Run, x.Task, x.Failover.Visits[name], of))
		}
	}
}
