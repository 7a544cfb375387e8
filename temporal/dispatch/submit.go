package dispatch

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// RunLease is the lease a run on Temporal holds on its interval in the
// state when it is created; the workers visiting it renew it (every third
// of their registration lease, for three leases) until it ends.
const RunLease = time.Minute

// Submission is a run to hand to Temporal.
type Submission struct {
	Plan     *compiler.Plan
	BaseDir  string
	Interval runtime.Interval
	// Value is the interval as given.
	Value string
	// Force: the run reuses nothing from earlier runs of the interval
	// (store.Run.Forced).
	Force bool
	// Heartbeat, RouteWait, Recheck: see RunInput (0: the defaults).
	Heartbeat, RouteWait, Recheck time.Duration
}

// Submitted is a run handed to Temporal.
type Submitted struct {
	Run        store.Run
	WorkflowID string
	RunID      string
}

// BusyError is a submission refused because the interval's workflow is
// open.
type BusyError struct{ WorkflowID, Pipeline, Interval string }

func (e *BusyError) Error() string {
	return "workflow " + e.WorkflowID + " is open: a run of the interval is in progress on Temporal"
}

// RunBusy is the refusal as the state's own refusal of a second run of an
// interval reads (pipec submit --due and backfill --submit report it so):
// the interval's run in progress in the state, submitted to the workers;
// the workflow when the state has none running (its end is being
// recorded).
func (e *BusyError) RunBusy(ctx context.Context, st store.Store) *store.RunBusyError {
	b := &store.RunBusyError{Run: e.WorkflowID, Submitted: true}
	runs, err := st.ListRuns(ctx, store.RunFilter{Pipeline: e.Pipeline, Interval: e.Interval})
	if err != nil {
		return b
	}
	for _, r := range runs { // oldest first: the last running one wins
		if r.State == store.RunRunning {
			b.Run = r.ID
		}
	}
	return b
}

// Submit records the run in the state (refused there as pipec submit's
// would be: another run of the interval in progress, max_active_runs) and
// starts its workflow, whose ID is the interval's: Temporal refuses it
// while a workflow of the interval is open, and then the run just
// recorded is ended as failed, saying so.
func Submit(ctx context.Context, c client.Client, st store.Store, s Submission) (Submitted, error) {
	id, err := st.StateID(ctx)
	if err != nil {
		return Submitted{}, err
	}
	names := Names{State: id}
	wid := names.WorkflowID(s.Plan.Pipeline, s.Interval.Key)
	if d, err := c.DescribeWorkflowExecution(ctx, wid, ""); err == nil &&
		d.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return Submitted{}, &BusyError{WorkflowID: wid, Pipeline: s.Plan.Pipeline, Interval: s.Interval.Key}
	}
	host, _ := os.Hostname()
	max := 0
	if s.Plan.Schedule != nil {
		max = s.Plan.Schedule.MaxActiveRuns
	}
	run, err := st.CreateRun(ctx, store.NewRun{Pipeline: s.Plan.Pipeline, Interval: s.Interval.Key,
		IntervalStart: s.Interval.Start, IntervalEnd: s.Interval.End, CodeVersion: s.Plan.CodeVersion,
		PlanDigest: s.Plan.Digest, TaskDigests: s.Plan.TaskDigests(), Forced: s.Force, Owner: store.RunOwner{Host: "temporal:" + host, PID: os.Getpid()},
		Lease: RunLease, MaxActive: max})
	if err != nil {
		return Submitted{}, err
	}
	if err := supersede(ctx, st, run); err != nil {
		_ = st.FinishRun(context.WithoutCancel(ctx), run.ID, store.RunFailed)
		return Submitted{}, err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(s.Plan.Marshal())
	_ = zw.Close()
	in := RunInput{Run: run.ID, State: id, Pipeline: s.Plan.Pipeline, Interval: s.Value, BaseDir: s.BaseDir, Plan: gz.Bytes(), Force: s.Force,
		Tasks: queue.PlanTasks(s.Plan), Heartbeat: s.Heartbeat, RouteWait: s.RouteWait, Recheck: s.Recheck,
		ContinueAfter: testContinueAfter()}
	we, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wid, TaskQueue: names.WorkflowQueue(),
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL}, WorkflowName, in)
	if err != nil {
		bg := context.WithoutCancel(ctx)
		_ = st.FinishRun(bg, run.ID, store.RunFailed)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return Submitted{}, &BusyError{WorkflowID: wid, Pipeline: s.Plan.Pipeline, Interval: s.Interval.Key}
		}
		return Submitted{}, fmt.Errorf("starting workflow %s: %w", wid, err)
	}
	_, _ = st.AppendEvent(ctx, store.Event{Run: run.ID, Kind: queue.EventRunSubmitted,
		Payload: []byte(fmt.Sprintf(`{"engine":"temporal","workflow_id":%q,"workflow_run_id":%q,"tasks":%d}`, wid, we.GetRunID(), len(in.Tasks)))})
	return Submitted{Run: run, WorkflowID: wid, RunID: we.GetRunID()}, nil
}

// supersede abandons the runs of run's interval left running, as a local
// run takes over one whose pipec stopped: the state let run be created,
// so their leases lapsed, and the interval's workflow is closed (Submit),
// so nobody will end them (a workflow terminated by an operator, or one
// that could not record its run's end). Their unfinished attempts become
// unknown, for the new run's visits to judge.
func supersede(ctx context.Context, st store.Store, run store.Run) error {
	runs, err := st.ListRuns(ctx, store.RunFilter{Pipeline: run.Pipeline, Interval: run.Interval})
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.ID == run.ID || r.State != store.RunRunning {
			continue
		}
		payload, _ := json.Marshal(map[string]string{"superseded": r.ID})
		if _, err := st.AppendEvent(ctx, store.Event{Run: run.ID, Kind: runtime.EventRunSuperseded, Payload: payload}); err != nil {
			return err
		}
		if _, err := st.AbandonRun(ctx, r.ID, "superseded by "+run.ID+": its workflow closed before the run finished"); err != nil {
			return err
		}
	}
	return nil
}

// Cancel cancels the interval's open workflow of the state names are of:
// it starts nothing more, its running visits are stopped (their processes
// too), and the run ends failed.
func Cancel(ctx context.Context, c client.Client, names Names, pipeline, interval string) error {
	return c.CancelWorkflow(ctx, names.WorkflowID(pipeline, interval), "")
}

// Wait waits for the workflow to end and returns its last status; the
// error is the workflow's (a cancelled run's included).
func Wait(ctx context.Context, c client.Client, wid, rid string) (Status, error) {
	var s Status
	err := c.GetWorkflow(ctx, wid, rid).Get(ctx, &s)
	return s, err
}

// Query asks the workflow for its status.
func Query(ctx context.Context, c client.Client, wid, rid string) (Status, error) {
	v, err := c.QueryWorkflow(ctx, wid, rid, QueryStatus)
	if err != nil {
		return Status{}, err
	}
	var s Status
	err = v.Get(&s)
	return s, err
}
