package dispatch

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/pipec/pipec/internal/failover"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// RunInput is a workflow's input: the run pipec submit recorded in the
// state, and its compiled plan. Workers read the plan from the workflow's
// first history event (once per run), so no activity carries it.
type RunInput struct {
	// Run is the run's id in the state (CreateRun).
	Run string
	// State is that state's identity: the run's task queues are its
	// (Names), so that only the workers of that state take its work.
	State    string
	Pipeline string
	// Interval is the value the interval was given as; BaseDir the
	// spec's folder, where tasks run.
	Interval string
	BaseDir  string
	// Plan is the compiled plan (JSON, gzipped: a plan of a thousand
	// tasks is 700 kB of JSON, above Temporal's payload warning of 512 kB;
	// gzipped, a tenth of it).
	Plan []byte
	// Force: the run reuses nothing from earlier runs of the interval
	// (store.Run.Forced): every visit runs its task again. Absent from
	// the inputs of workflows started before pipec had it: false.
	Force bool `json:",omitempty"`
	// Tasks are the plan's tasks as a queue's Submit takes them: needs,
	// failover limits, labels.
	Tasks []queue.Task
	// Heartbeat is the activities' heartbeat timeout (DefaultHeartbeat
	// when 0): a worker silent that long has lost the visit, as a
	// worker whose lease expired.
	Heartbeat time.Duration
	// RouteWait bounds how long a start routed to one worker's queue
	// waits for that worker to take it (then the start is undone, not
	// counted, and routed again).
	RouteWait time.Duration
	// Recheck is how often a task waiting for a worker looks at the live
	// workers again.
	Recheck time.Duration
	// ContinueAfter, when positive, is a history length past which the
	// run continues as new (a test's knob: otherwise it does when Temporal
	// suggests it, well before its history limits).
	ContinueAfter int
	// Carried is the progress of the run's earlier workflow runs, when
	// it continued as new: a Progress, JSON, gzipped (a task's failover
	// state is some 200 bytes of JSON; the input shares Temporal's 2 MB
	// payload limit with the plan).
	Carried []byte
}

// Progress is what a run carries over when it continues as new: each
// task's state in the DAG and in pipec's failover model, in plan order.
// No visit is running then (the run stops starting visits and waits for
// the running ones before it continues).
type Progress struct {
	Tasks []TaskProgress
	// Seen are the workers that ended a visit (batches are spread over
	// them).
	Seen []string
	// Continued counts the workflow runs before this one.
	Continued int
}

// TaskProgress is one task's carried state.
type TaskProgress struct {
	Task      string
	State     string
	Reason    string
	WaitingOn int
	Failover  failover.State
	Visits    int
}

// VisitInput is one visit's activity input.
type VisitInput struct {
	Run  string
	Task string
	// Worker is the worker the visit was routed to ("" for the queue of
	// the task's labels: any eligible worker).
	Worker string
	// First: the task's first visit in the run, so it has no attempts in
	// the run yet (the visit need not count them).
	First bool
}

// VisitsInput is a batch of visits' activity input: first starts of
// ready tasks bound for one queue, run one after the other by the worker
// that takes it (Activities.Visits).
type VisitsInput struct {
	Run   string
	Tasks []string
	// First, per task, as VisitInput.First.
	First []bool
}

// VisitOutput is how a visit ended, as the worker's queue.Result says.
type VisitOutput struct {
	Worker        string
	Ending        queue.Ending
	Deterministic bool
	Reason        string
}

// TaskStatus is one task of the run as the status query answers.
type TaskStatus struct {
	Task     string
	State    string
	Worker   string
	Reason   string
	Failover failover.State
	Limits   failover.Limits
}

// Status is the status query's answer, and the workflow's result.
type Status struct {
	Run   string
	State store.RunState
	// Waiting says what the run waits for ("task extract: waiting for a
	// worker: global count 3 of 4"), as queue.RunStatus.Waiting.
	Waiting string
	Tasks   []TaskStatus
}

// LiveWorker is a live pipec worker on Temporal, as the state lists it.
type LiveWorker struct {
	Name   string
	Labels []string
}

type wtask struct {
	work      queue.Work
	state     string
	reason    string
	waitingOn int
	// visit is the running visit's; routed the worker it was routed to.
	visit  *wvisit
	routed string
	// visits counts the visits started, handed back ones included.
	visits int
}

// wvisit is a running visit activity: one task's, or a batch's.
type wvisit struct {
	future workflow.Future
	tasks  []*wtask
	batch  bool
}

// maxBatch bounds the tasks of one batch of visits: the tasks of a batch
// run one after the other, so their dependents wait for the batch.
const maxBatch = 16

// batchSize is how many of n ready tasks bound for one queue go in each
// batch: spread over the workers seen so far, and one more not seen yet,
// that are not running a visit now (each takes a batch; when all are
// busy, one batch waits for the first that is free), one task a visit
// until a visit has ended (no worker seen yet).
func batchSize(n, workers, running int) int {
	if workers <= 0 {
		return 1
	}
	free := max(workers+1-running, 1)
	return min(max((n+free-1)/free, 1), maxBatch)
}

// RunWorkflow is one run: it walks the DAG (a task is ready when every
// task it needs succeeded, as in the queue's Finish), starts each ready
// task's visit as an activity, and decides what a visit's end does with
// runtime/queue's decisions (queue.Finished, queue.Spread, queue.RunEnd),
// so a run on Temporal tells the story a run on pipec's own queue tells.
// Everything here is deterministic: tasks are visited in plan order, the
// live workers come from a local activity (recorded in the history).
func RunWorkflow(ctx workflow.Context, in RunInput) (Status, error) {
	names := Names{State: in.State}
	if in.Heartbeat <= 0 {
		in.Heartbeat = DefaultHeartbeat
	}
	if in.RouteWait <= 0 {
		in.RouteWait = defaultRouteWait
	}
	if in.Recheck <= 0 {
		in.Recheck = defaultWaitRecheck
	}
	nws, err := queue.Plan(queue.Submission{Tasks: in.Tasks})
	if err != nil {
		return Status{}, temporal.NewNonRetryableApplicationError(err.Error(), "plan", nil)
	}
	order := make([]string, len(nws))
	tasks := make(map[string]*wtask, len(nws))
	for i, nw := range nws {
		order[i] = nw.Task
		tasks[nw.Task] = &wtask{state: nw.State, waitingOn: nw.WaitingOn, work: queue.Work{
			Ref: queue.Ref{Run: in.Run, Task: nw.Task}, Limits: nw.Limits, Dependents: nw.Dependents, Labels: nw.Labels}}
	}
	st := Status{Run: in.Run, State: store.RunRunning}
	status := func() Status {
		s := st
		s.Tasks = make([]TaskStatus, 0, len(order))
		for _, name := range order {
			t := tasks[name]
			s.Tasks = append(s.Tasks, TaskStatus{Task: name, State: t.state, Worker: t.work.Worker, Reason: t.reason,
				Failover: t.work.Failover, Limits: t.work.Limits})
		}
		return s
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (Status, error) { return status(), nil }); err != nil {
		return Status{}, err
	}
	// Batches of visits: versioned, so histories recorded before replay
	// with a visit per task.
	batching := workflow.GetVersion(ctx, versionBatchedVisits, workflow.DefaultVersion, 1) >= 1
	// Lost visits judged by activities on StateQueue instead of local
	// activities (markLost says why): versioned, as batches.
	lostByActivity := workflow.GetVersion(ctx, versionLostActivity, workflow.DefaultVersion, 1) >= 1
	// judgeLost runs ActivityLost or ActivityLostInBatch.
	judgeLost := func(name string, result any, args ...any) error {
		if lostByActivity {
			// A few writes: a worker that does not answer within seconds
			// is paused or cut off (it may have taken the activity with a
			// poll it made before), and another worker takes it over.
			actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: names.StateQueue(),
				StartToCloseTimeout: 5 * time.Second, RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond,
					MaximumAttempts: 10}})
			return workflow.ExecuteActivity(actx, name, args...).Get(ctx, result)
		}
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 10}})
		return workflow.ExecuteLocalActivity(lctx, name, args...).Get(ctx, result)
	}
	// seen are the workers that ended a visit: how many batches a set of
	// ready tasks is spread over (from the history: deterministic).
	seen := map[string]bool{}
	// Continue-as-new: versioned, as batches.
	continuing := workflow.GetVersion(ctx, versionContinueAsNew, workflow.DefaultVersion, 1) >= 1
	continued := 0
	if in.Carried != nil {
		var c Progress
		if err := gunzipJSON(in.Carried, &c); err != nil {
			return Status{}, temporal.NewNonRetryableApplicationError("the carried progress: "+err.Error(), "progress", nil)
		}
		continued = c.Continued
		for _, w := range c.Seen {
			seen[w] = true
		}
		for _, tp := range c.Tasks {
			if t := tasks[tp.Task]; t != nil {
				t.state, t.reason, t.waitingOn, t.work.Failover, t.visits = tp.State, tp.Reason, tp.WaitingOn, tp.Failover, tp.Visits
			}
		}
	}

	live := func(ctx workflow.Context) []LiveWorker {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}})
		var ws []LiveWorker
		if err := workflow.ExecuteLocalActivity(lctx, ActivityLive).Get(ctx, &ws); err != nil {
			workflow.GetLogger(ctx).Warn("live workers", "error", err)
		}
		return ws
	}
	start := func(t *wtask, worker string) {
		q := names.TasksQueue(t.work.Labels)
		ao := workflow.ActivityOptions{TaskQueue: q, StartToCloseTimeout: 30 * 24 * time.Hour, HeartbeatTimeout: in.Heartbeat,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}, WaitForCancellation: true}
		if worker != "" {
			ao.TaskQueue, ao.ScheduleToStartTimeout = names.WorkerQueue(worker), in.RouteWait
		}
		t.state, t.routed = queue.WorkClaimed, worker
		t.visit = &wvisit{tasks: []*wtask{t}, future: workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ao), ActivityVisit,
			VisitInput{Run: in.Run, Task: t.work.Task, Worker: worker, First: t.visits == 0})}
		t.visits++
	}
	// startFirsts starts first starts (any eligible worker), in batches
	// of the tasks bound for the same queue.
	startFirsts := func(ts []*wtask) {
		var queues []string
		byQueue := map[string][]*wtask{}
		for _, t := range ts {
			q := names.TasksQueue(t.work.Labels)
			if byQueue[q] == nil {
				queues = append(queues, q)
			}
			byQueue[q] = append(byQueue[q], t)
		}
		running := 0
		for _, name := range order {
			if v := tasks[name].visit; v != nil && v.tasks[0] == tasks[name] {
				running++
			}
		}
		for _, q := range queues {
			group := byQueue[q]
			size := batchSize(len(group), len(seen), running)
			for len(group) > 0 {
				b := group[:min(size, len(group))]
				group = group[len(b):]
				if len(b) == 1 {
					start(b[0], "")
					continue
				}
				vin := VisitsInput{Run: in.Run}
				v := &wvisit{tasks: b, batch: true}
				for _, t := range b {
					vin.Tasks, vin.First = append(vin.Tasks, t.work.Task), append(vin.First, t.visits == 0)
					t.state, t.routed, t.visit = queue.WorkClaimed, "", v
					t.visits++
				}
				ao := workflow.ActivityOptions{TaskQueue: q, StartToCloseTimeout: 30 * 24 * time.Hour, HeartbeatTimeout: in.Heartbeat,
					RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}, WaitForCancellation: true}
				v.future = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ao), ActivityVisits, vin)
				running++
			}
		}
	}
	// markNotRun is queue.Spread's Marker over the workflow's tasks.
	markNotRun := func(task, why string) ([]string, bool, error) {
		t := tasks[task]
		if t == nil || t.state != queue.WorkBlocked {
			return nil, false, nil
		}
		t.state, t.reason = queue.WorkNotRun, why
		return t.work.Dependents, true, nil
	}
	// ended applies a visit's end: the model's step, then the DAG's.
	// lostOn, for a task of a lost batch, is the worker its lost visit
	// counts on ("" for none), as ActivityLostInBatch judged it.
	ended := func(t *wtask, out VisitOutput, err error, lostOn *string) {
		t.visit = nil
		if err == nil && out.Worker != "" {
			seen[out.Worker] = true
		}
		worker := out.Worker
		res := queue.Result{Ending: out.Ending, Deterministic: out.Deterministic, Reason: out.Reason}
		lost := false
		var te *temporal.TimeoutError
		var ce *temporal.CanceledError
		switch {
		case err == nil:
		case errors.As(err, &te) && te.TimeoutType() == enums.TIMEOUT_TYPE_SCHEDULE_TO_START:
			// The routed worker never took it: a start that never happened.
			res = queue.Result{Ending: queue.HandedBack}
			worker = t.routed
		case errors.As(err, &te):
			// No heartbeat for the timeout: the worker is gone, paused or
			// cut off, as a lease that expired.
			var hb string
			if te.HasLastHeartbeatDetails() && te.LastHeartbeatDetails(&hb) == nil && hb != "" {
				worker = hb
			}
			if worker == "" {
				worker = t.routed
			}
			res, lost = queue.Result{Ending: queue.LeaseLost}, true
		case errors.As(err, &ce):
			// The run was cancelled: the visit stopped, nothing to count.
			t.state, t.reason, t.work.Worker = queue.WorkNotRun, "the run was cancelled", ""
			return
		default:
			// The visit's activity failed (its worker's heartbeat was
			// refused, it stopped): its worker is no longer running it,
			// as a lease that expired.
			worker, res, lost = t.routed, queue.Result{Ending: queue.LeaseLost}, true
		}
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 10}})
		if lost {
			// Before the task starts anywhere else: the visit's attempts
			// become unknown in the state. Its worker is the one that
			// started its attempt when Temporal does not know it (no
			// heartbeat arrived before it went silent).
			var found string
			if lostOn != nil {
				worker = *lostOn
			} else if err := judgeLost(ActivityLost, &found, in.Run, t.work.Task, worker); err != nil {
				workflow.GetLogger(ctx).Warn("a lost visit's attempts", "task", t.work.Task, "error", err)
			}
			if worker == "" {
				worker = found
			}
		}
		if worker == "" && t.work.Failover.Worker == "" {
			// Nobody is known to have started it: as if never started.
			t.state = queue.WorkReady
			return
		}
		if worker == "" {
			worker = t.work.Failover.Worker
		}
		if t.work.Failover.Worker != worker {
			// A start on the queue of the task's labels: the model learns
			// where it went now (a first start, which anyone may make).
			if serr := t.work.Failover.Start(t.work.Limits, worker, []string{worker}); serr != nil {
				workflow.GetLogger(ctx).Warn("failover start", "task", t.work.Task, "error", serr)
			}
		}
		t.work.Worker = worker
		ch, ferr := queue.Finished(&t.work, worker, res)
		if ferr != nil {
			ch = queue.Change{State: queue.WorkFailed, Reason: ferr.Error(), Spread: queue.SpreadFailed}
		}
		if len(ch.Notes) > 0 && ch.State != queue.WorkSucceeded {
			// The model's events, in the run's log.
			if err := workflow.ExecuteLocalActivity(lctx, ActivityNotes, in.Run, t.work.Task, ch.Notes).Get(ctx, nil); err != nil {
				workflow.GetLogger(ctx).Warn("recording a visit's end", "task", t.work.Task, "error", err)
			}
		}
		t.state, t.reason = ch.State, ch.Reason
		if ch.State != queue.WorkClaimed {
			t.work.Worker = ""
		}
		if ch.Advance {
			for _, d := range t.work.Dependents {
				if dt := tasks[d]; dt != nil && dt.state == queue.WorkBlocked {
					if dt.waitingOn--; dt.waitingOn <= 0 {
						dt.state = queue.WorkReady
					}
				}
			}
		}
		if ch.Spread != "" {
			_ = queue.Spread(t.work.Task, t.work.Dependents, ch.Spread, markNotRun)
		}
	}

	cancelled, draining := false, false
	// progressed: this execution started a visit or waited a recheck, so
	// continuing as new never loops without progress.
	progressed := false
	for {
		if continuing && !draining && !cancelled && progressed {
			// Before Temporal's history limits: start nothing more, and
			// continue as new once the running visits have ended.
			info := workflow.GetInfo(ctx)
			draining = info.GetContinueAsNewSuggested() ||
				(in.ContinueAfter > 0 && info.GetCurrentHistoryLength() >= in.ContinueAfter)
		}
		// Start what is ready, unless cancelled.
		var waiting, firsts []*wtask
		var ws []LiveWorker
		fetched := false
		if !cancelled && !draining {
			for _, name := range order {
				t := tasks[name]
				if t.state != queue.WorkReady {
					continue
				}
				if t.work.Failover.Pending == failover.NoMove {
					// A first start: any eligible worker.
					if batching {
						firsts = append(firsts, t)
					} else {
						start(t, "")
					}
					continue
				}
				// A failover: pipec's model picks the worker.
				if !fetched {
					ws, fetched = live(ctx), true
				}
				names := eligible(t.work.Labels, ws)
				i := t.work.Failover.Pick(t.work.Limits, names)
				if i < 0 {
					waiting = append(waiting, t)
					continue
				}
				if err := t.work.Failover.Start(t.work.Limits, names[i], names); err != nil {
					waiting = append(waiting, t)
					continue
				}
				start(t, names[i])
			}
			startFirsts(firsts)
		}
		was := st.Waiting
		st.Waiting = ""
		if len(waiting) > 0 {
			t := waiting[0]
			st.Waiting = queue.WaitingMessage(t.work.Task, t.work.Labels, t.work.Limits, &t.work.Failover,
				len(eligible(t.work.Labels, ws)) == 0)
		}
		if st.Waiting != "" && st.Waiting != was &&
			workflow.GetVersion(ctx, versionWaitingEvent, workflow.DefaultVersion, 1) >= 1 {
			// The run's log says it waits (pipec events, pipec ui), as a
			// queue's claim records it. Versioned: histories recorded
			// before this step replay without it.
			lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second,
				RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 10}})
			note := queue.Note{Kind: queue.EventRunWaiting, Payload: map[string]any{"waiting": st.Waiting}}
			if err := workflow.ExecuteLocalActivity(lctx, ActivityNotes, in.Run, "", []queue.Note{note}).Get(ctx, nil); err != nil {
				workflow.GetLogger(ctx).Warn("recording the run's waiting", "error", err)
			}
		}
		var running []*wvisit
		for _, name := range order {
			if v := tasks[name].visit; v != nil && v.tasks[0] == tasks[name] {
				running = append(running, v)
			}
		}
		progressed = progressed || len(running) > 0
		if len(running) == 0 && (len(waiting) == 0 || cancelled || draining) {
			break
		}
		sel := workflow.NewSelector(ctx)
		for _, v := range running {
			sel.AddFuture(v.future, func(f workflow.Future) {
				if !v.batch {
					var out VisitOutput
					err := f.Get(ctx, &out)
					ended(v.tasks[0], out, err, nil)
					return
				}
				var outs []VisitOutput
				err := f.Get(ctx, &outs)
				var lostOn []string
				var ce *temporal.CanceledError
				if err != nil && !errors.As(err, &ce) {
					// A batch's heartbeat names its worker, not which of
					// its tasks it had started: the state's attempts say,
					// in one local activity for the batch.
					var hb string
					var te *temporal.TimeoutError
					if errors.As(err, &te) && te.HasLastHeartbeatDetails() {
						_ = te.LastHeartbeatDetails(&hb)
					}
					names := make([]string, len(v.tasks))
					for i, t := range v.tasks {
						names[i] = t.work.Task
					}
					if lerr := judgeLost(ActivityLostInBatch, &lostOn, in.Run, names, hb); lerr != nil {
						workflow.GetLogger(ctx).Warn("a lost batch's attempts", "error", lerr)
					}
				}
				for i, t := range v.tasks {
					var out VisitOutput
					terr := err
					if terr == nil && i >= len(outs) {
						terr = fmt.Errorf("the batch's activity answered %d of %d visits", len(outs), len(v.tasks))
					} else if terr == nil {
						out = outs[i]
					}
					var on *string
					if lostOn != nil {
						on = new(string)
						if i < len(lostOn) {
							*on = lostOn[i]
						}
					}
					ended(t, out, terr, on)
				}
			})
		}
		if !cancelled {
			sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) { cancelled = true })
		}
		if len(waiting) > 0 && !cancelled {
			sel.AddFuture(workflow.NewTimer(ctx, in.Recheck), func(workflow.Future) { progressed = true })
		}
		sel.Select(ctx)
	}

	if draining && !cancelled {
		next := in
		carried := Progress{Continued: continued + 1}
		for w := range seen {
			carried.Seen = append(carried.Seen, w)
		}
		slices.Sort(carried.Seen)
		for _, name := range order {
			t := tasks[name]
			carried.Tasks = append(carried.Tasks, TaskProgress{Task: name, State: t.state, Reason: t.reason,
				WaitingOn: t.waitingOn, Failover: t.work.Failover, Visits: t.visits})
		}
		b, err := gzipJSON(carried)
		if err != nil {
			return status(), err
		}
		next.Carried = b
		workflow.GetLogger(ctx).Info("continuing as new", "run", in.Run, "continued", continued+1)
		return status(), workflow.NewContinueAsNewError(ctx, WorkflowName, next)
	}
	open, bad := 0, 0
	for _, name := range order {
		t := tasks[name]
		switch t.state {
		case queue.WorkSucceeded:
		case queue.WorkFailed, queue.WorkNotRun:
			bad++
		default:
			if cancelled {
				t.state, t.reason = queue.WorkNotRun, "the run was cancelled"
				bad++
			} else {
				open++
			}
		}
	}
	state, _ := queue.RunEnd(open, bad)
	if open > 0 {
		state = store.RunFailed
	}
	st.State, st.Waiting = state, ""
	// The run's end in the state, even when the workflow was cancelled.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	lctx := workflow.WithLocalActivityOptions(dctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 10}})
	if err := workflow.ExecuteLocalActivity(lctx, ActivityEndRun, in.Run, state, cancelled).Get(dctx, nil); err != nil {
		return status(), err
	}
	if cancelled {
		return status(), temporal.NewCanceledError(fmt.Sprintf("run %s cancelled", in.Run))
	}
	return status(), nil
}

// versionWaitingEvent is the change that records a run.waiting event when
// the run starts waiting for a worker (workflow.GetVersion).
const versionWaitingEvent = "run.waiting-event"

// versionLostActivity is the change that judges lost visits in
// activities rather than local activities (judgeLost).
const versionLostActivity = "lost-activity"

// versionBatchedVisits is the change that starts the first starts of ready
// tasks bound for one queue in batches (ActivityVisits).
const versionBatchedVisits = "batched-visits"

// versionContinueAsNew is the change that continues a long run as new.
const versionContinueAsNew = "continue-as-new"

// gzipJSON and gunzipJSON carry a value as gzipped JSON (deterministic:
// the same value gives the same bytes).
func gzipJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func gunzipJSON(gz []byte, v any) error {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return err
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// eligible are the live workers offering the labels, by name.
func eligible(labels []string, ws []LiveWorker) []string {
	out := []string{}
	for _, w := range ws {
		if failover.Eligible(labels, w.Labels) && !slices.Contains(out, w.Name) {
			out = append(out, w.Name)
		}
	}
	return out
}
