package dispatch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/exec"
	"github.com/pipec/pipec/runtime/objstore"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// Activities are a worker's activities: they run on the worker's machine,
// against the shared state.
type Activities struct {
	Name   string
	Store  store.Store
	Queue  queue.Queue
	Client client.Client
	// As worker.Config's fields of the same names.
	Workdir, Artifacts, DefaultArtifacts, ServerState string
	Environ                                           []string
	TaskLease, LeasePoll, KillGrace                   time.Duration
	// RunLease is the lease a worker keeps on the runs it has visited
	// until they end (renewed every RunLease/3).
	RunLease time.Duration
	Log      io.Writer
	Self     exec.Identity

	// slots bounds the visits running at once across the worker's task
	// queues (each queue's own limit is the worker's slots too).
	slots chan struct{}

	mu      sync.Mutex
	running map[*int]context.CancelCauseFunc
	plans   map[string]*run   // by workflow run id
	runs    map[string]string // runs whose lease this worker renews, to their workflow IDs
	logMu   sync.Mutex
	// objects serves every visit's object stores: credentials are
	// resolved once per worker, not once per task.
	objects objstore.Clients
}

func (a *Activities) logf(format string, args ...any) {
	if a.Log == nil {
		return
	}
	a.logMu.Lock()
	defer a.logMu.Unlock()
	fmt.Fprintf(a.Log, format+"\n", args...)
}

// errShutdown: the worker stops gracefully (its visits are handed back);
// errUnreachable: the worker could not reach Temporal for longer than its
// grace, so Temporal has given its visits up (a lost lease).
var (
	errShutdown    = errors.New("the worker is shutting down")
	errUnreachable = errors.New("the worker could not reach Temporal for longer than its grace")
)

// stopAll stops every running visit with cause.
func (a *Activities) stopAll(cause error) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, cancel := range a.running {
		cancel(cause)
	}
	return len(a.running)
}

// run is what a worker keeps of a run it visits: its input and its
// decoded plan (shared, read-only, by the run's visits).
type run struct {
	in   *RunInput
	plan *compiler.Plan
	// setup is what every visit of the plan shares (runtime.PreparePlan
	// of visitOptions); nil when it could not be made, and then each
	// visit derives its own (and says why it cannot).
	setup *runtime.PlanSetup
}

// visitOptions are the options of every visit of r's plan.
func (a *Activities) visitOptions(r *run) runtime.Options {
	env := append(slices.Clone(a.Environ), "PIPEC_WORKER="+a.Name)
	return runtime.Options{Plan: r.plan, BaseDir: r.in.BaseDir, Interval: r.in.Interval, Store: a.Store,
		Scratch: a.Workdir, ServerState: a.ServerState, Artifacts: a.Artifacts,
		DefaultArtifacts: a.DefaultArtifacts, Environ: env, Worker: a.Name, Self: a.Self,
		DefaultLease: a.TaskLease, LeasePoll: a.LeasePoll, KillGrace: a.KillGrace, ObjectStores: &a.objects, Setup: r.setup,
		Force: r.in.Force, AfterExit: testAfterExit()}
}

// plan returns the run's input and plan, read from the workflow's first
// history event once per run.
func (a *Activities) plan(ctx context.Context, wid, rid string) (*run, error) {
	a.mu.Lock()
	if r := a.plans[rid]; r != nil {
		a.mu.Unlock()
		return r, nil
	}
	a.mu.Unlock()
	it := a.Client.GetWorkflowHistory(ctx, wid, rid, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return nil, fmt.Errorf("workflow %s has no history", wid)
	}
	ev, err := it.Next()
	if err != nil {
		return nil, err
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return nil, fmt.Errorf("workflow %s: its first event is %s", wid, ev.GetEventType())
	}
	var in RunInput
	if err := converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), &in); err != nil {
		return nil, err
	}
	var p compiler.Plan
	if err := decodePlan(in.Plan, &p); err != nil {
		return nil, fmt.Errorf("the submitted plan does not decode: %w", err)
	}
	r := &run{in: &in, plan: &p}
	if setup, err := runtime.PreparePlan(a.visitOptions(r)); err == nil {
		r.setup = setup
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.plans == nil {
		a.plans = map[string]*run{}
	}
	if len(a.plans) > 16 {
		clear(a.plans)
	}
	a.plans[rid] = r
	return r, nil
}

// Visit runs one visit of a task: runtime.RunVisit, heartbeating to
// Temporal (the worker's name, so a timeout says who went silent) while
// the runtime renews the attempt's lease in the state.
func (a *Activities) Visit(ctx context.Context, v VisitInput) (VisitOutput, error) {
	outs, err := a.visits(ctx, v.Run, []string{v.Task}, []bool{v.First})
	if err != nil {
		return VisitOutput{Worker: a.Name}, err
	}
	return outs[0], nil
}

// Visits runs a visit of each of several tasks of a run, one after the
// other in one slot of the worker: one activity, so Temporal records and
// dispatches one task's worth for all of them (the workflow batches the
// first starts of ready tasks bound for the same queue). Each task is its
// own visit in the state (its attempts, tokens, lease); the heartbeat to
// Temporal covers them all. When the worker stops gracefully, the tasks
// not yet visited are handed back.
func (a *Activities) Visits(ctx context.Context, v VisitsInput) ([]VisitOutput, error) {
	return a.visits(ctx, v.Run, v.Tasks, v.First)
}

func (a *Activities) visits(ctx context.Context, runID string, tasks []string, first []bool) ([]VisitOutput, error) {
	info := activity.GetInfo(ctx)
	outs := make([]VisitOutput, len(tasks))
	handBack := func(from int) []VisitOutput {
		for i := from; i < len(outs); i++ {
			outs[i] = VisitOutput{Worker: a.Name, Ending: queue.HandedBack}
		}
		return outs
	}
	vctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	key := new(int)
	a.mu.Lock()
	if a.running == nil {
		a.running = map[*int]context.CancelCauseFunc{}
	}
	a.running[key] = cancel
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.running, key)
		a.mu.Unlock()
	}()
	done := make(chan struct{})
	defer close(done)
	// Heartbeats every quarter timeout from the start, before the plan is
	// read: a worker's first visit of a run reads it from the run's
	// history, which under load can take longer than the timeout.
	go func() {
		every := max(info.HeartbeatTimeout/4, 20*time.Millisecond)
		if info.HeartbeatTimeout <= 0 {
			every = time.Second
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-activity.GetWorkerStopChannel(ctx):
				cancel(errShutdown)
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, a.Name)
			}
		}
	}()
	sub, err := a.plan(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID)
	if err != nil {
		// Another worker may read it: no failure of the task.
		a.logf("%s %s: the run's plan: %v; handing it back", runID, strings.Join(tasks, ","), err)
		return handBack(0), nil
	}
	a.keepRun(runID, info.WorkflowExecution.ID)
	hold := &holder{client: a.Client, token: info.TaskToken, name: a.Name, timeout: info.HeartbeatTimeout}
	if a.slots != nil {
		select {
		case a.slots <- struct{}{}:
			defer func() { <-a.slots }()
		case <-vctx.Done():
			if errors.Is(context.Cause(vctx), errShutdown) {
				return handBack(0), nil
			}
			return nil, ctx.Err()
		}
	}
	for i, task := range tasks {
		if errors.Is(context.Cause(vctx), errShutdown) {
			return handBack(i), nil
		}
		out, err := a.visit(ctx, vctx, sub, hold, runID, task, i < len(first) && first[i])
		if err != nil {
			return nil, err
		}
		outs[i] = out
	}
	return outs, nil
}

// holder confirms with Temporal that an activity is still the one its
// workflow waits for (runtime.Visit.Held). Temporal gives an activity up
// when no heartbeat came within its timeout, and starts the task
// elsewhere; the activity's worker (paused, starved) learns that only
// from a heartbeat's answer, and must not end that other visit's process
// or start a non-idempotent task beside it meanwhile. A heartbeat answered
// holds the activity at least until the timeout after it was sent: within
// half of that, no call is made.
type holder struct {
	client  client.Client
	token   []byte
	name    string
	timeout time.Duration

	mu   sync.Mutex
	sent time.Time // when the last heartbeat answered was sent
	// refused is the answer that said no: Temporal gave the activity up,
	// or its workflow asks it to stop (the run is cancelled).
	refused error
}

func (h *holder) confirm(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refused != nil {
		return h.refused
	}
	if !h.sent.IsZero() && time.Since(h.sent) < h.timeout/2 {
		return nil
	}
	sent := time.Now()
	// Unanswered within the timeout, the activity may be given up by now:
	// as good as a no.
	cctx, cancel := context.WithTimeout(ctx, cmp.Or(h.timeout, 10*time.Second))
	defer cancel()
	if err := h.client.RecordActivityHeartbeat(cctx, h.token, h.name); err != nil {
		h.refused = fmt.Errorf("Temporal no longer waits for this activity: %w", err)
		return h.refused
	}
	h.sent = sent
	return nil
}

// refusal is the answer that said no (nil while none did).
func (h *holder) refusal() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused
}

// visit runs one task's visit in vctx (ctx's, cancelled with a cause when
// the worker stops or is cut off from Temporal).
func (a *Activities) visit(ctx, vctx context.Context, sub *run, hold *holder, runID, task string, first bool) (VisitOutput, error) {
	in, p := sub.in, sub.plan
	out := VisitOutput{Worker: a.Name}
	// The attempts of the task in this run, on any worker, before this
	// visit (one resource's attempts, not the whole run's); none before
	// its first visit.
	base := 0
	if !first {
		iv, err := runtime.ResolveInterval(p.Schedule, in.Interval)
		if err != nil {
			out.Ending, out.Deterministic, out.Reason = queue.Failed, true, err.Error()
			return out, nil
		}
		as, err := a.Store.TaskAttempts(ctx, store.FenceResource(p.Pipeline, iv.Key), task)
		if err != nil {
			out.Ending = queue.HandedBack
			return out, nil
		}
		for _, at := range as {
			if at.Run == runID {
				base = max(base, at.Number)
			}
		}
	}
	slot, err := a.holdPool(vctx, p, runID, task) // its pool's slot, if any (pools.go)
	if err != nil {
		return stoppedWaiting(vctx, out)
	}
	defer slot.release()
	a.logf("%s %s: start on %s", runID, task, a.Name)
	testPauseBeforeVisit(task)
	res, err := runtime.RunVisit(vctx, runtime.Visit{Options: a.visitOptions(sub),
		Run: runID, Task: task, AttemptBase: base, Held: hold.confirm})
	bg := context.WithoutCancel(ctx)
	if res.End != nil {
		// The visit's last attempt's end (a queue's Finish records it).
		if ferr := a.Store.FinishAttempt(bg, res.End.Ref, res.End.Outcome); ferr != nil && !errors.Is(ferr, store.ErrConflict) {
			a.logf("%s %s: recording the attempt's end: %v", runID, task, ferr)
		}
	}
	cause := context.Cause(vctx)
	refused := hold.refusal()
	var cancelled *temporal.CanceledError
	switch {
	case errors.As(refused, &cancelled):
		a.logf("%s %s: stopped: the run is cancelled", runID, task)
		return out, cancelled
	case refused != nil:
		// Its workflow has given the task to another visit: not this
		// worker's to report, nor its next tasks to run.
		a.logf("%s %s: stopped here: %v", runID, task, refused)
		return out, refused
	case errors.Is(cause, errShutdown):
		a.logf("%s %s: handed back", runID, task)
		out.Ending = queue.HandedBack
	case errors.Is(cause, errUnreachable):
		// Temporal has timed the visit out by now: not ours to report.
		a.logf("%s %s: stopped: %v", runID, task, cause)
		return out, cause
	case ctx.Err() != nil:
		// Cancelled by the workflow (pipec cancel), timed out by Temporal
		// (this worker was silent too long), or its heartbeat could not
		// get through (the SDK then cancels it): not this worker's to
		// report any more.
		why := "Temporal cancelled the visit or could not be reached: " + context.Cause(ctx).Error()
		a.logf("%s %s: stopped: %s", runID, task, why)
		return out, ctx.Err()
	case res.LeaseLost:
		a.logf("%s %s: stopped here: its lease in the state expired", runID, task)
		out.Ending = queue.LeaseLost
	default:
		r, said := res.Ended(err, a.Name)
		if said != "" {
			a.logf("%s %s: %s", runID, task, said)
		}
		out.Ending, out.Deterministic, out.Reason = r.Ending, r.Deterministic, r.Reason
	}
	return out, nil
}

// keepRun adds run, whose workflow is workflowID, to the runs whose lease
// this worker renews.
func (a *Activities) keepRun(run, workflowID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runs == nil {
		a.runs = map[string]string{}
	}
	if _, ok := a.runs[run]; !ok {
		a.runs[run] = workflowID
		_ = a.Store.RenewRunLease(context.Background(), run, a.RunLease)
	}
}

// renewRuns renews the lease of the runs this worker visited while they
// run and their workflow is open, and forgets the others. A workflow that
// closed without ending its run (terminated by an operator, or failed)
// leaves nobody to end it: renewed, its lease would hold the interval for
// as long as the worker lives; let lapse, the next submission of the
// interval takes the run over, as the next run does after a crash.
func (a *Activities) renewRuns(ctx context.Context) {
	a.mu.Lock()
	runs := maps.Clone(a.runs)
	a.mu.Unlock()
	forget := func(run string) {
		a.mu.Lock()
		delete(a.runs, run)
		a.mu.Unlock()
	}
	for r, wid := range runs {
		if open, status := a.workflowOpen(ctx, wid); !open {
			forget(r)
			if run, err := a.Store.GetRun(ctx, r); err == nil && run.State == store.RunRunning {
				a.logf("%s: its workflow %s is %s, and did not end the run: its lease lapses, and the next submission of the interval takes it over",
					r, wid, status)
			}
			continue
		}
		if err := a.Store.RenewRunLease(ctx, r, a.RunLease); err != nil {
			if run, gerr := a.Store.GetRun(ctx, r); gerr == nil && run.State != store.RunRunning {
				forget(r)
			}
		}
	}
}

// workflowOpen says whether the latest execution of workflowID runs (a
// workflow continued as new goes on in its next one), and its status
// ("terminated", "failed", …) when it does not. A workflow Temporal could
// not be asked about counts as open: the lease is kept meanwhile.
func (a *Activities) workflowOpen(ctx context.Context, workflowID string) (bool, string) {
	resp, err := a.Client.DescribeWorkflowExecution(ctx, workflowID, "")
	var gone *serviceerror.NotFound
	switch {
	case errors.As(err, &gone):
		return false, "gone from Temporal"
	case err != nil:
		return true, ""
	}
	status := resp.GetWorkflowExecutionInfo().GetStatus()
	if status == enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT {
		return false, "timed out"
	}
	return status == enums.WORKFLOW_EXECUTION_STATUS_RUNNING, strings.ToLower(status.String())
}

// LiveWorkers lists the live pipec workers on Temporal (EngineLabel), for
// the workflow's failover routing.
func (a *Activities) LiveWorkers(ctx context.Context) ([]LiveWorker, error) {
	rows, err := a.Queue.Workers(ctx)
	if err != nil {
		return nil, err
	}
	out := []LiveWorker{}
	for _, r := range rows {
		if !r.Live || r.State != queue.WorkerLive || !slices.Contains(r.Labels, EngineLabel) {
			continue
		}
		out = append(out, LiveWorker{Name: r.Name, Labels: slices.DeleteFunc(slices.Clone(r.Labels),
			func(l string) bool { return l == EngineLabel })})
	}
	return out, nil
}

// EndRun records the run's end in the state.
func (a *Activities) EndRun(ctx context.Context, run string, state store.RunState, cancelled bool) error {
	if cancelled {
		// Recorded as pipec cancel records it (who and why), unless pipec
		// cancel did so first.
		_, err := a.Store.CancelRun(ctx, run, "its workflow was cancelled", "temporal")
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
		return nil
	}
	err := a.Store.FinishRun(ctx, run, state)
	if err != nil && errors.Is(err, store.ErrConflict) {
		return nil
	}
	return err
}

// Lost is a visit Temporal timed out (its worker sent no heartbeat for the
// timeout: killed, paused, cut off), as a queue's sweep finds a claim
// expired: the visit's unfinished attempts become unknown, so the next
// visit's runtime judges them as it judges any attempt nobody saw end. It
// returns the worker whose attempts those are: worker when given, else
// the worker of the task's latest attempt in the run if it is unfinished
// ("" when there is none: the visit started no attempt).
func (a *Activities) Lost(ctx context.Context, run, task, worker string) (string, error) {
	as, err := a.Store.Attempts(ctx, run)
	if err != nil {
		return "", err
	}
	worker, refs := lostAttempts(as, task, worker)
	return worker, a.markLost(ctx, refs)
}

// lostAttempts is Lost's choice among the run's attempts as: the worker
// the lost visit of task counts on, and its attempts to make unknown.
func lostAttempts(as []store.Attempt, task, worker string) (string, []store.AttemptRef) {
	if worker == "" {
		last := latestAttempt(as, task)
		if last < 0 || as[last].State.Finished() {
			return "", nil
		}
		worker = as[last].Worker
	}
	var refs []store.AttemptRef
	for _, at := range as {
		if at.Task == task && at.Worker == worker && !at.State.Finished() && at.State != store.AttemptUnknown {
			refs = append(refs, at.AttemptRef)
		}
	}
	return worker, refs
}

// latestAttempt is the index in as of task's attempt of the highest
// number, -1 for none.
func latestAttempt(as []store.Attempt, task string) int {
	last := -1
	for i, at := range as {
		if at.Task == task && (last < 0 || at.Number > as[last].Number) {
			last = i
		}
	}
	return last
}

// markLost makes the attempts refs unknown once Temporal confirmed that
// the workflow still waits for this activity (confirmCurrent). They were
// chosen from attempts read before that: while the workflow waited, so
// before it started the task anywhere else, and none of them is the
// attempt of a visit that took the lost one's place. A workflow task (or
// an activity) whose worker was paused past its timeout runs on when it
// resumes; without the check, it would choose among attempts of visits
// started since, and make a live one unknown.
func (a *Activities) markLost(ctx context.Context, refs []store.AttemptRef) error {
	if len(refs) == 0 {
		return nil
	}
	if err := a.confirmCurrent(ctx); err != nil {
		return err
	}
	for _, ref := range refs {
		err := a.Store.FinishAttempt(ctx, ref, store.Outcome{State: store.AttemptUnknown,
			Class: "lost", ErrorTail: queue.UnknownClaimExpired + " (no heartbeat to Temporal)"})
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return nil
}

// confirmCurrent has Temporal answer a heartbeat of the running activity:
// a yes says its workflow still waits for it. A local activity cannot ask:
// the histories recorded before Lost became an activity run it as one.
func (a *Activities) confirmCurrent(ctx context.Context) error {
	if !activity.IsActivity(ctx) {
		return nil
	}
	info := activity.GetInfo(ctx)
	if info.IsLocalActivity {
		return nil
	}
	h := holder{client: a.Client, token: info.TaskToken, name: a.Name, timeout: info.StartToCloseTimeout}
	return h.confirm(ctx)
}

// LostInBatch is Lost for a batch of visits Temporal timed out (or whose
// activity failed): worker is the batch's (its heartbeat's; "" when none
// arrived). It returns, per task in the batch's order, the worker its lost
// visit counts on, "" for none. The batch's worker visits its tasks one
// after the other, so: a task whose attempt succeeded is not lost (its
// next visit reuses what it produced); a task whose latest attempt is that
// worker's and did not succeed (running, or made unknown by a sweep) is
// lost on it, its unfinished attempts unknown; the first task that did
// not succeed is the one the worker was on (claimed, in the queue's
// words), lost on it even if its attempt had not started; the tasks after
// it were never started: not lost.
func (a *Activities) LostInBatch(ctx context.Context, run string, tasks []string, worker string) ([]string, error) {
	as, err := a.Store.Attempts(ctx, run)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(tasks))
	var refs []store.AttemptRef
	onIt := true // the worker was on the first task that did not succeed
	for i, task := range tasks {
		last := latestAttempt(as, task)
		if last >= 0 && as[last].State == store.AttemptSucceeded {
			continue
		}
		w := worker
		if w == "" && last >= 0 {
			w = as[last].Worker
		}
		mine := last >= 0 && as[last].Worker == w
		if w == "" || !(mine || onIt) {
			continue
		}
		onIt = false
		state := "not started"
		if mine {
			state = string(as[last].State)
		}
		a.logf("%s %s: lost with its batch on %s (its attempt: %s)", run, task, w, state)
		var its []store.AttemptRef
		out[i], its = lostAttempts(as, task, w)
		refs = append(refs, its...)
	}
	return out, a.markLost(ctx, refs)
}

// Notes records the failover model's events of a visit's end.
func (a *Activities) Notes(ctx context.Context, run, task string, notes []queue.Note) error {
	for _, n := range notes {
		b, err := json.Marshal(n.Payload)
		if err != nil {
			return err
		}
		if _, err := a.Store.AppendEvent(ctx, store.Event{Run: run, Kind: n.Kind, Task: task, Payload: b}); err != nil {
			return err
		}
	}
	return nil
}

// decodePlan reads a RunInput's gzipped plan.
func decodePlan(gz []byte, p *compiler.Plan) error { return gunzipJSON(gz, p) }
