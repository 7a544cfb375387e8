package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/failover"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// runQueue runs the queue's checks (queue.Queue) as subtests.
func runQueue(t *testing.T, open Opener) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"SubmitClaimFinishAdvance", testSubmitClaimFinishAdvance},
		{"SubmittedForced", testSubmittedForced},
		{"SubmitRefusesBrokenDAG", testSubmitRefusesBrokenDAG},
		{"FailureSpreadsNotRun", testFailureSpreadsNotRun},
		{"NotRunSpreads", testNotRunSpreads},
		{"HandBackUncounted", testHandBackUncounted},
		{"LeaseExpirySweep", testLeaseExpirySweep},
		{"WaitingForAWorker", testWaitingForAWorker},
		{"StoppingClaimsNothing", testStoppingClaimsNothing},
		{"ClaimPastWaitingTasks", testClaimPastWaitingTasks},
		{"FinishRecordsTheAttemptsEnd", testFinishRecordsTheAttemptsEnd},
		{"FinishIsAtomic", testFinishIsAtomic},
		{"FinishAfterTheClaimWasLost", testFinishAfterTheClaimWasLost},
		{"FinishClaiming", testFinishClaiming},
		{"ConcurrentClaims", testConcurrentClaims},
		{"WorkerNameLiveElsewhere", testWorkerNameLiveElsewhere},
		{"WorkersListed", testWorkersListed},
		{"Wakeups", testWakeups},
		{"Labels", testLabels},
		{"FailoverAmongLabelledWorkers", testFailoverAmongLabelledWorkers},
		{"PoolSlotsAcrossRuns", testPoolSlotsAcrossRuns},
		{"PoolConcurrentClaims", testPoolConcurrentClaims},
		{"PoolSlotHolds", testPoolSlotHolds},
		{"PoolSlotsWithClaims", testPoolSlotsWithClaims},
		{"PoolSlotsConcurrent", testPoolSlotsConcurrent},
		{"OneRunPerInterval", testOneRunPerInterval},
		{"FollowStatus", testFollowStatus},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
	}
}

const lease = 10 * time.Second

func registerLabels(t *testing.T, h Handle, name string, labels ...string) {
	t.Helper()
	if err := h.Register(context.Background(), queue.WorkerInfo{Name: name, Host: "host", PID: 1, Slots: 1, Labels: labels}, lease); err != nil {
		t.Fatal(err)
	}
}

// claimed is the task worker claims, "" for none.
func claimed(t *testing.T, h Handle, worker string) string {
	t.Helper()
	if cl := claim(t, h, worker); cl != nil {
		return cl.Task
	}
	return ""
}

// once: a task without a failover block, one attempt per visit.
var once = failover.Limits{Attempts: 1, Global: failover.NoLimit, NoFailover: true}

func submission(interval string, tasks ...queue.Task) queue.Submission {
	return queue.Submission{
		Run: store.NewRun{Pipeline: "orders", Interval: interval,
			IntervalStart: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), IntervalEnd: time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC),
			CodeVersion: "v1", PlanDigest: "sha256:plan"},
		Plan: []byte(`{"pipeline":"orders"}`), BaseDir: "/specs/orders", Interval: interval,
		Tasks: tasks,
	}
}

func task(name string, l failover.Limits, needs ...string) queue.Task {
	return queue.Task{Name: name, Needs: needs, Limits: l}
}

func submit(t *testing.T, h Handle, sub queue.Submission) string {
	t.Helper()
	r, err := h.Submit(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	return r.ID
}

func register(t *testing.T, h Handle, names ...string) {
	t.Helper()
	for i, n := range names {
		if err := h.Register(context.Background(), queue.WorkerInfo{Name: n, Host: "host", PID: 1000 + i, Slots: 1}, lease); err != nil {
			t.Fatal(err)
		}
	}
}

func claim(t *testing.T, h Handle, worker string) *queue.Claim {
	t.Helper()
	cl, err := h.Claim(context.Background(), worker, lease)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// mustClaim claims and wants task.
func mustClaim(t *testing.T, h Handle, worker, task string) *queue.Claim {
	t.Helper()
	cl := claim(t, h, worker)
	if cl == nil || cl.Task != task {
		t.Fatalf("%s claimed %+v, want %s", worker, cl, task)
	}
	return cl
}

func finish(t *testing.T, h Handle, worker string, cl *queue.Claim, r queue.Result) {
	t.Helper()
	if err := h.Finish(context.Background(), worker, cl.Ref, r); err != nil {
		t.Fatal(err)
	}
}

func status(t *testing.T, h Handle, run string) (queue.RunStatus, map[string]queue.TaskStatus) {
	t.Helper()
	rs, err := h.Status(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	sameFollowed(t, h, run, new(queue.StatusMemo), rs)
	by := map[string]queue.TaskStatus{}
	for _, ts := range rs.Tasks {
		by[ts.Task] = ts
	}
	return rs, by
}

func states(rs queue.RunStatus) string {
	var b []string
	for _, ts := range rs.Tasks {
		b = append(b, ts.Task+"="+ts.State)
	}
	return strings.Join(b, " ")
}

func kinds(t *testing.T, h Handle, run string) []string {
	t.Helper()
	evs, err := h.Events(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		k := e.Kind
		if e.Task != "" {
			k += " " + e.Task
		}
		out = append(out, k)
	}
	return out
}

// finishedPayload is the payload of run's run.finished event, as the
// store logged it ("" for none): the same bytes from every store.
func finishedPayload(t *testing.T, h Handle, run string) string {
	t.Helper()
	evs, err := h.Events(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind == store.EventRunFinished {
			return string(e.Payload)
		}
	}
	return ""
}

// A DAG extract -> clean -> load, with report beside it needing nothing:
// ready tasks are claimed by run and task, a success makes its dependents
// ready, and the run ends, succeeded, with the last task.
// A forced run (store.Run.Forced) is forced for its visits (Submitted),
// in the run's record and in its run.created event.
func testSubmittedForced(t *testing.T, open Opener) {
	h := open(t, nil)(t)
	ctx := context.Background()
	sub := submission("2024-01-01", task("extract", once))
	sub.Run.Forced = true
	run := submit(t, h, sub)
	if sr, err := h.Submitted(ctx, run); err != nil || !sr.Forced {
		t.Fatalf("Submitted of a forced run: forced %v, %v", sr.Forced, err)
	}
	if r, err := h.GetRun(ctx, run); err != nil || !r.Forced {
		t.Fatalf("GetRun of a forced run: forced %v, %v", r.Forced, err)
	}
	if rs, err := h.ListRuns(ctx, store.RunFilter{Pipeline: "orders"}); err != nil || len(rs) != 1 || !rs[0].Forced {
		t.Fatalf("ListRuns: %+v, %v; want the forced run", rs, err)
	}
	evs, err := h.Events(ctx, run)
	if err != nil || len(evs) == 0 || evs[0].Kind != store.EventRunCreated || !strings.Contains(string(evs[0].Payload), `"forced":true`) {
		t.Fatalf("the run's first event: %+v, %v; want run.created saying forced", evs, err)
	}
}

func testSubmitClaimFinishAdvance(t *testing.T, open Opener) {
	h := open(t, nil)(t)
	ctx := context.Background()
	sub := submission("2024-01-01", task("extract", once), task("clean", once, "extract"), task("load", once, "clean"), task("report", once))
	run := submit(t, h, sub)
	if run != "orders/2024-01-01/r1" {
		t.Fatalf("run id %s", run)
	}
	sr, err := h.Submitted(ctx, run)
	if err != nil || string(sr.Plan) != string(sub.Plan) || sr.BaseDir != sub.BaseDir || sr.Interval != sub.Interval || sr.Forced {
		t.Fatalf("Submitted = %q %q %q forced %v, %v", sr.Plan, sr.BaseDir, sr.Interval, sr.Forced, err)
	}
	if _, err := h.Submitted(ctx, "orders/2024-01-01/r9"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Submitted of an unknown run: %v, want store.ErrNotFound", err)
	}
	rs, _ := status(t, h, run)
	if got := states(rs); got != "clean=blocked extract=ready load=blocked report=ready" || rs.Run.State != store.RunRunning {
		t.Fatalf("after submit: %s, run %s", got, rs.Run.State)
	}
	register(t, h, "w1", "w2")
	c1 := mustClaim(t, h, "w1", "extract")
	c2 := mustClaim(t, h, "w2", "report")
	if c1.AttemptBase != 0 || c1.Failover.Starts != 1 || c1.Failover.Worker != "w1" {
		t.Fatalf("claim %+v", c1)
	}
	if cl := claim(t, h, "w1"); cl != nil {
		t.Fatalf("claimed %+v with nothing ready", cl)
	}
	finish(t, h, "w2", c2, queue.Result{Ending: queue.Succeeded})
	finish(t, h, "w1", c1, queue.Result{Ending: queue.Succeeded})
	if err := h.Finish(ctx, "w1", c1.Ref, queue.Result{Ending: queue.Succeeded}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("finishing twice: %v, want store.ErrLeaseLost", err)
	}
	rs, _ = status(t, h, run)
	if got := states(rs); got != "clean=ready extract=succeeded load=blocked report=succeeded" {
		t.Fatalf("after extract: %s", got)
	}
	// The attempt count a claim starts from is the task's attempts so far.
	if _, err := h.StartAttempt(ctx, store.AttemptSpec{Run: run, Task: "clean", Resource: "orders@2024-01-01", Worker: "w2"}); err != nil {
		t.Fatal(err)
	}
	c3 := mustClaim(t, h, "w2", "clean")
	if c3.AttemptBase != 1 {
		t.Fatalf("clean's claim after one attempt: base %d, want 1", c3.AttemptBase)
	}
	finish(t, h, "w2", c3, queue.Result{Ending: queue.Succeeded})
	c4 := mustClaim(t, h, "w1", "load")
	if rs, _ := status(t, h, run); rs.Run.State != store.RunRunning {
		t.Fatalf("run %s before its last task finished", rs.Run.State)
	}
	finish(t, h, "w1", c4, queue.Result{Ending: queue.Succeeded})
	rs, _ = status(t, h, run)
	if rs.Run.State != store.RunSucceeded || rs.Run.Finished.IsZero() {
		t.Fatalf("after the last task: run %+v", rs.Run)
	}
	ev := kinds(t, h, run)
	if !slices.Contains(ev, queue.EventRunSubmitted) || !slices.Contains(ev, queue.EventWorkClaimed+" load") ||
		!slices.Contains(ev, queue.EventWorkSucceeded+" load") || ev[len(ev)-1] != store.EventRunFinished {
		t.Fatalf("events %v", ev)
	}
	if got := finishedPayload(t, h, run); got != `{"state":"succeeded"}` {
		t.Errorf("run.finished payload %s", got)
	}
}

func testSubmitRefusesBrokenDAG(t *testing.T, open Opener) {
	h := open(t, nil)(t)
	ctx := context.Background()
	if _, err := h.Submit(ctx, submission("2024-01-01", task("clean", once, "extract"))); err == nil ||
		!strings.Contains(err.Error(), "needs extract, which the plan does not have") {
		t.Fatalf("a task needing an unknown one: %v", err)
	}
	if _, err := h.Submit(ctx, submission("2024-01-01")); err == nil {
		t.Fatal("a submission without tasks was accepted")
	}
	// Nothing was recorded.
	if runs, err := h.ListRuns(ctx, store.RunFilter{}); err != nil || len(runs) != 0 {
		t.Fatalf("runs after refused submissions: %v, %v", runs, err)
	}
}

// extract -> clean -> load and extract -> audit: extract fails (no failover
// block), everything downstream is not run with the local run's reasons,
// and the run fails.
func testFailureSpreadsNotRun(t *testing.T, open Opener) {
	h := open(t, nil)(t)
	run := submit(t, h, submission("2024-01-01", task("extract", once), task("clean", once, "extract"),
		task("load", once, "clean"), task("audit", once, "extract")))
	register(t, h, "w1")
	cl := mustClaim(t, h, "w1", "extract")
	finish(t, h, "w1", cl, queue.Result{Ending: queue.Failed, Reason: "run_error: exit 1"})
	rs, by := status(t, h, run)
	if rs.Run.State != store.RunFailed {
		t.Fatalf("run %s, want failed (%s)", rs.Run.State, states(rs))
	}
	want := map[string][2]string{
		"extract": {queue.WorkFailed, "run_error: exit 1"},
		"clean":   {queue.WorkNotRun, "needs extract, which failed"},
		"audit":   {queue.WorkNotRun, "needs extract, which failed"},
		"load":    {queue.WorkNotRun, "needs clean, which was not run"},
	}
	for name, w := range want {
		if ts := by[name]; ts.State != w[0] || ts.Reason != w[1] {
			t.Errorf("%s: %s %q, want %s %q", name, ts.State, ts.Reason, w[0], w[1])
		}
	}
	ev := kinds(t, h, run)
	for _, k := range []string{queue.EventWorkStopped + " extract", queue.EventWorkNotRun + " load", store.EventRunFinished} {
		if !slices.Contains(ev, k) {
			t.Errorf("events lack %q: %v", k, ev)
		}
	}
	if got := finishedPayload(t, h, run); got != `{"state":"failed"}` {
		t.Errorf("run.finished payload %s", got)
	}
}

// A task not run (an input without a version) spreads as "not run".
func testNotRunSpreads(t *testing.T, open Opener) {
	h := open(t, nil)(t)
	run := submit(t, h, submission("2024-01-01", task("clean", once), task("load", once, "clean")))
	register(t, h, "w1")
	cl := mustClaim(t, h, "w1", "clean")
	finish(t, h, "w1", cl, queue.Result{Ending: queue.NotRun, Reason: "input raw has no accepted version"})
	rs, by := status(t, h, run)
	if rs.Run.State != store.RunFailed || by["clean"].State != queue.WorkNotRun || by["clean"].Reason != "input raw has no accepted version" ||
		by["load"].Reason != "needs clean, which was not run" {
		t.Fatalf("run %s, tasks %+v", rs.Run.State, by)
	}
}

// A worker shutting down hands its task back: with per_worker = 1 and
// global = 0 (no failover allowed) another worker still takes it, and
// nothing was counted.
func testHandBackUncounted(t *testing.T, open Opener) {
	h := open(t, nil)(t)
	l := failover.Limits{Attempts: 1, PerWorker: 1, Global: 0}
	run := submit(t, h, submission("2024-01-01", task("load", l)))
	register(t, h, "w1", "w2")
	cl := mustClaim(t, h, "w1", "load")
	if err := h.Stopping(context.Background(), "w1"); err != nil {
		t.Fatal(err)
	}
	finish(t, h, "w1", cl, queue.Result{Ending: queue.HandedBack})
	_, by := status(t, h, run)
	ts := by["load"]
	if ts.State != queue.WorkReady || ts.Worker != "" || ts.Failover.Starts != 0 || ts.Failover.Failovers != 0 || len(ts.Failover.Visits) != 0 ||
		!strings.Contains(ts.Reason, "handed back by w1") {
		t.Fatalf("after the hand-back: %+v", ts)
	}
	if cl := claim(t, h, "w1"); cl != nil {
		t.Fatalf("a stopping worker claimed %+v", cl)
	}
	cl = mustClaim(t, h, "w2", "load")
	if cl.Failover.Failovers != 0 || cl.Failover.Starts != 1 {
		t.Fatalf("w2's claim counts %+v", cl.Failover)
	}
	finish(t, h, "w2", cl, queue.Result{Ending: queue.Succeeded})
	if rs, _ := status(t, h, run); rs.Run.State != store.RunSucceeded {
		t.Fatalf("run %s", rs.Run.State)
	}
	if ev := kinds(t, h, run); !slices.Contains(ev, queue.EventWorkHandedBack+" load") {
		t.Fatalf("events %v", ev)
	}
}

// A claim whose lease expired (its worker stopped heartbeating) is swept
// as a lost lease: counted with a failover block, the task is ready for
// another worker, the old worker's Finish and Heartbeat learn it is gone;
// a heartbeat in time keeps the claim.
func testLeaseExpirySweep(t *testing.T, open Opener) {
	clock := newFakeClock()
	h := open(t, clock.Now)(t)
	ctx := context.Background()
	l := failover.Limits{Attempts: 1, PerWorker: 1, Global: 3}
	run := submit(t, h, submission("2024-01-01", task("extract", l), task("clean", once, "extract")))
	register(t, h, "w1", "w2")
	cl := mustClaim(t, h, "w1", "extract")

	clock.Advance(lease - time.Second)
	held, err := h.Heartbeat(ctx, "w1", lease)
	if err != nil || len(held) != 1 || held[0] != cl.Ref {
		t.Fatalf("Heartbeat = %v, %v; want the claim", held, err)
	}
	if _, err := h.Heartbeat(ctx, "w2", lease); err != nil {
		t.Fatal(err)
	}
	clock.Advance(lease - time.Second)
	if n, err := h.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("Sweep of a renewed claim = %d, %v", n, err)
	}
	if _, err := h.Heartbeat(ctx, "w2", lease); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second) // exactly at expiry: expired
	if n, err := h.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want the expired claim", n, err)
	}
	_, by := status(t, h, run)
	ts := by["extract"]
	if ts.State != queue.WorkReady || ts.Worker != "" || !strings.Contains(ts.Reason, "the lease of w1 expired") || ts.Failover.Pending != failover.Counted {
		t.Fatalf("after the sweep: %+v", ts)
	}
	if err := h.Finish(ctx, "w1", cl.Ref, queue.Result{Ending: queue.Succeeded}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the old worker's Finish: %v, want store.ErrLeaseLost", err)
	}
	held, err = h.Heartbeat(ctx, "w1", lease)
	if err != nil || len(held) != 0 {
		t.Fatalf("the old worker's Heartbeat = %v, %v; want no claims", held, err)
	}
	// Moved (counted) to w2, which takes it with one failover.
	if cl := claim(t, h, "w1"); cl != nil {
		t.Fatalf("w1 claimed the task it lost (per_worker 1): %+v", cl)
	}
	cl2 := mustClaim(t, h, "w2", "extract")
	if cl2.Failover.Failovers != 1 {
		t.Fatalf("the relaunch counts %+v, want one failover", cl2.Failover)
	}
	finish(t, h, "w2", cl2, queue.Result{Ending: queue.Succeeded})
	if ev := kinds(t, h, run); !slices.Contains(ev, queue.EventWorkLeaseLost+" extract") || !slices.Contains(ev, queue.EventWorkFailover+" extract") {
		t.Fatalf("events %v", ev)
	}
	// Without a failover block a lost lease moves the task for free.
	c3 := mustClaim(t, h, "w2", "clean")
	clock.Advance(2 * lease)
	if _, err := h.Heartbeat(ctx, "w1", lease); err != nil {
		t.Fatal(err)
	}
	if n, err := h.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	c4 := mustClaim(t, h, "w1", "clean")
	if c4.Failover.Failovers != 0 {
		t.Fatalf("a free move counted: %+v", c4.Failover)
	}
	if err := h.Finish(ctx, "w2", c3.Ref, queue.Result{Ending: queue.Failed}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the swept worker's Finish: %v", err)
	}
	finish(t, h, "w1", c4, queue.Result{Ending: queue.Succeeded})
	if rs, _ := status(t, h, run); rs.Run.State != store.RunSucceeded {
		t.Fatalf("run %s", rs.Run.State)
	}
}

// per_worker = 1, global = 4 on w1 and w2: after a failed visit on each,
// no live worker may start the task; the run says so (status and event)
// until w3 joins and claims it.
func testWaitingForAWorker(t *testing.T, open Opener) {
	h := open(t, nil)(t)
	l := failover.Limits{Attempts: 1, PerWorker: 1, Global: 4}
	run := submit(t, h, submission("2024-01-01", task("extract", l)))
	register(t, h, "w1", "w2")
	cl := mustClaim(t, h, "w1", "extract")
	finish(t, h, "w1", cl, queue.Result{Ending: queue.Failed, Reason: "run_error: exit 1"})
	if cl := claim(t, h, "w1"); cl != nil {
		t.Fatalf("w1 claimed again with per_worker 1 while w2 may: %+v", cl)
	}
	if rs, _ := status(t, h, run); rs.Waiting != "" {
		t.Fatalf("waiting %q while w2 may take it", rs.Waiting)
	}
	cl = mustClaim(t, h, "w2", "extract")
	if cl.Failover.Failovers != 1 {
		t.Fatalf("counts %+v", cl.Failover)
	}
	finish(t, h, "w2", cl, queue.Result{Ending: queue.Failed})
	for _, w := range []string{"w1", "w2", "w1"} {
		if cl := claim(t, h, w); cl != nil {
			t.Fatalf("%s claimed an exhausted task: %+v", w, cl)
		}
	}
	rs, by := status(t, h, run)
	want := "task extract: waiting for a worker: global count 1 of 4"
	if rs.Waiting != want || rs.Run.State != store.RunRunning || by["extract"].State != queue.WorkReady {
		t.Fatalf("waiting %q, run %s, %s; want %q, running", rs.Waiting, rs.Run.State, states(rs), want)
	}
	waits := 0
	for _, k := range kinds(t, h, run) {
		if k == queue.EventRunWaiting {
			waits++
		}
	}
	if waits != 1 {
		t.Fatalf("%d run.waiting events for one wait (three claims saw it)", waits)
	}
	register(t, h, "w3")
	cl = mustClaim(t, h, "w3", "extract")
	if rs, _ := status(t, h, run); rs.Waiting != "" {
		t.Fatalf("still waiting after w3 claimed: %q", rs.Waiting)
	}
	finish(t, h, "w3", cl, queue.Result{Ending: queue.Succeeded})
	if rs, _ := status(t, h, run); rs.Run.State != store.RunSucceeded || rs.Waiting != "" {
		t.Fatalf("run %s waiting %q", rs.Run.State, rs.Waiting)
	}
}

// A lone worker whose ten first tasks (by name) all wait for another worker
// still claims the eleventh, past them, and the run says it waits for the
// first of them.
func testClaimPastWaitingTasks(t *testing.T, open Opener) {
	h := open(t, nil)(t)
	l := failover.Limits{Attempts: 1, PerWorker: 1, Global: 5}
	var ts []queue.Task
	for i := range 10 {
		ts = append(ts, task(fmt.Sprintf("t%02d", i), l))
	}
	run := submit(t, h, submission("2024-01-01", append(ts, task("t10", once))...))
	register(t, h, "w1")
	for i := range 10 {
		cl := mustClaim(t, h, "w1", fmt.Sprintf("t%02d", i))
		finish(t, h, "w1", cl, queue.Result{Ending: queue.Failed})
	}
	mustClaim(t, h, "w1", "t10")
	want := "task t00: waiting for a worker: global count 0 of 5"
	if rs, _ := status(t, h, run); rs.Waiting != want {
		t.Fatalf("waiting %q, want %q", rs.Waiting, want)
	}
}

// A worker that is stopping, stopped, or whose heartbeat lapsed, claims
// nothing; one that registers again claims.
func testStoppingClaimsNothing(t *testing.T, open Opener) {
	clock := newFakeClock()
	h := open(t, clock.Now)(t)
	ctx := context.Background()
	submit(t, h, submission("2024-01-01", task("extract", once)))
	register(t, h, "w1")
	if err := h.Stopping(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	if cl := claim(t, h, "w1"); cl != nil {
		t.Fatalf("a stopping worker claimed %+v", cl)
	}
	if err := h.Deregister(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Heartbeat(ctx, "w1", lease); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("heartbeat of a stopped worker: %v, want store.ErrNotFound", err)
	}
	register(t, h, "w1")
	clock.Advance(lease)
	if cl := claim(t, h, "w1"); cl != nil {
		t.Fatalf("a worker whose lease lapsed claimed %+v", cl)
	}
	if _, err := h.Heartbeat(ctx, "w1", lease); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, h, "w1", "extract")
}

// Workers on separate handles (separate processes, as far as the database
// knows) claim at once: every task is claimed exactly once.
func testConcurrentClaims(t *testing.T, open Opener) {
	opener := open(t, nil)
	const workers, tasks = 4, 40
	var ts []queue.Task
	for i := range tasks {
		ts = append(ts, task(fmt.Sprintf("t%02d", i), once))
	}
	h0 := opener(t)
	run := submit(t, h0, submission("2024-01-01", ts...))
	handles := make([]Handle, workers)
	for i := range handles {
		handles[i] = opener(t)
		register(t, handles[i], fmt.Sprintf("w%d", i+1))
	}
	var wg sync.WaitGroup
	got := make([][]string, workers)
	errs := make([]error, workers)
	for i := range handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("w%d", i+1)
			for {
				cl, err := handles[i].Claim(context.Background(), name, lease)
				if err != nil {
					errs[i] = err
					return
				}
				if cl == nil {
					return
				}
				got[i] = append(got[i], cl.Task)
			}
		}()
	}
	wg.Wait()
	seen := map[string]string{}
	for i := range got {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		for _, task := range got[i] {
			if other, ok := seen[task]; ok {
				t.Fatalf("%s claimed by w%d and %s", task, i+1, other)
			}
			seen[task] = fmt.Sprintf("w%d", i+1)
		}
	}
	if len(seen) != tasks {
		t.Fatalf("%d tasks claimed, want %d", len(seen), tasks)
	}
	_, by := status(t, h0, run)
	for task, w := range seen {
		if by[task].State != queue.WorkClaimed || by[task].Worker != w {
			t.Fatalf("%s: %+v, want claimed by %s", task, by[task], w)
		}
	}
}

// A worker's name held by a live worker of another process is refused;
// the same process registering again, or anyone after the lease lapsed,
// is not.
func testWorkerNameLiveElsewhere(t *testing.T, open Opener) {
	clock := newFakeClock()
	opener := open(t, clock.Now)
	h1, h2 := opener(t), opener(t)
	ctx := context.Background()
	w := queue.WorkerInfo{Name: "w1", Host: "box", PID: 100, Slots: 2}
	if err := h1.Register(ctx, w, lease); err != nil {
		t.Fatal(err)
	}
	if err := h1.Register(ctx, w, lease); err != nil {
		t.Fatalf("the same process registering again: %v", err)
	}
	other := w
	other.PID = 200
	err := h2.Register(ctx, other, lease)
	if err == nil || !strings.Contains(err.Error(), "worker w1 is live already (host box, pid 100)") {
		t.Fatalf("a second live w1: %v", err)
	}
	clock.Advance(lease)
	if err := h2.Register(ctx, other, lease); err != nil {
		t.Fatalf("after w1's lease lapsed: %v", err)
	}
	ws, err := h1.Workers(ctx)
	if err != nil || len(ws) != 1 || ws[0].PID != 200 || !ws[0].Live || ws[0].State != queue.WorkerLive {
		t.Fatalf("Workers = %+v, %v", ws, err)
	}
}

// pipec workers' view: live and lapsed workers, what each runs, and the
// failover counts per task of unfinished runs.
func testWorkersListed(t *testing.T, open Opener) {
	clock := newFakeClock()
	h := open(t, clock.Now)(t)
	ctx := context.Background()
	l := failover.Limits{Attempts: 1, PerWorker: 2, Global: 4}
	run := submit(t, h, submission("2024-01-01", task("extract", l), task("report", once)))
	if err := h.Register(ctx, queue.WorkerInfo{Name: "w2", Host: "box", PID: 2, Slots: 3, Labels: []string{"spark"}}, lease); err != nil {
		t.Fatal(err)
	}
	register(t, h, "w1")
	cl := mustClaim(t, h, "w1", "extract")
	finish(t, h, "w1", cl, queue.Result{Ending: queue.Failed})
	mustClaim(t, h, "w2", "extract")
	mustClaim(t, h, "w1", "report")
	clock.Advance(3 * time.Second)
	if _, err := h.Heartbeat(ctx, "w2", lease); err != nil {
		t.Fatal(err)
	}
	clock.Advance(lease - 2*time.Second) // w1 lapsed, w2 live
	ws, err := h.Workers(ctx)
	if err != nil || len(ws) != 2 {
		t.Fatalf("Workers = %+v, %v", ws, err)
	}
	w1, w2 := ws[0], ws[1]
	if w1.Name != "w1" || w1.Live || w1.State != queue.WorkerLive || !slices.Equal(w1.Running, []string{run + " report"}) ||
		!slices.Equal(w1.Failover, []string{run + " extract: 1 of 2"}) || w1.Ago != lease+time.Second {
		t.Errorf("w1 = %+v", w1)
	}
	if w2.Name != "w2" || !w2.Live || w2.Host != "box" || w2.PID != 2 || w2.Slots != 3 || !slices.Equal(w2.Labels, []string{"spark"}) ||
		!slices.Equal(w2.Running, []string{run + " extract"}) || !slices.Equal(w2.Failover, []string{run + " extract: 1 of 2"}) ||
		w2.Ago != lease-2*time.Second || !w2.Started.Equal(time.Date(2024, 1, 2, 3, 0, 0, 0, time.UTC)) {
		t.Errorf("w2 = %+v", w2)
	}
	// The failover state in the store is the model's own JSON.
	_, by := status(t, h, run)
	b, _ := json.Marshal(by["extract"].Failover)
	var back failover.State
	if err := json.Unmarshal(b, &back); err != nil || back.Visits["w1"] != 1 || back.Visits["w2"] != 1 || back.Failovers != 1 {
		t.Errorf("extract's failover state %s", b)
	}
}

// Wakeups: a submission from another handle wakes an idle worker's
// channel; the channel closes when its context ends.
func testWakeups(t *testing.T, open Opener) {
	opener := open(t, nil)
	idle, other := opener(t), opener(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := idle.Wakeups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	submit(t, other, submission("2024-01-01", task("extract", once)))
	select {
	case <-ch:
	case <-time.After(time.Minute): // bounds a broken implementation only
		t.Fatal("no wakeup after a submission")
	}
	cancel()
	for range ch {
		// drained until closed
	}
}

// Labels: a worker claims only tasks whose labels it offers all of; a
// labelled task no live worker offers the labels of makes the run say so
// (once), until a worker offering them joins and takes it.
func testLabels(t *testing.T, open Opener) {
	h := open(t, nil)(t)
	ctx := context.Background()
	sub := submission("2024-01-01", task("plain", once), task("agg", once), task("train", once))
	sub.Tasks[1].Labels = []string{"spark"}
	sub.Tasks[2].Labels = []string{"spark", "gpu"}
	run := submit(t, h, sub)
	registerLabels(t, h, "w0")
	registerLabels(t, h, "w1", "spark", "x")
	if got := claimed(t, h, "w0"); got != "plain" {
		t.Fatalf("w0 (no labels) claimed %q, want plain", got)
	}
	if got := claimed(t, h, "w0"); got != "" {
		t.Fatalf("w0 (no labels) claimed %q, want nothing", got)
	}
	if got := claimed(t, h, "w1"); got != "agg" {
		t.Fatalf("w1 (spark, x) claimed %q, want agg", got)
	}
	if got := claimed(t, h, "w1"); got != "" {
		t.Fatalf("w1 (spark, x) claimed %q: it lacks gpu", got)
	}
	want := "task train: waiting for a worker with labels gpu,spark (none is live)"
	if rs, _ := status(t, h, run); rs.Waiting != want {
		t.Fatalf("waiting %q, want %q", rs.Waiting, want)
	}
	claimed(t, h, "w0")
	registerLabels(t, h, "w2", "spark", "gpu", "gpu") // unsorted, a duplicate
	if got := claimed(t, h, "w2"); got != "train" {
		t.Fatalf("w2 (gpu, spark) claimed %q, want train", got)
	}
	if rs, _ := status(t, h, run); rs.Waiting != "" {
		t.Fatalf("still waiting %q after train was claimed", rs.Waiting)
	}
	waits := 0
	for _, k := range kinds(t, h, run) {
		if k == queue.EventRunWaiting {
			waits++
		}
	}
	if waits != 1 {
		t.Fatalf("%d run.waiting events, want 1", waits)
	}
	ws, err := h.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, w := range ws {
		got[w.Name] = strings.Join(w.Labels, ",")
	}
	if want := map[string]string{"w0": "", "w1": "spark,x", "w2": "gpu,spark"}; !maps.Equal(got, want) {
		t.Fatalf("workers' labels %v, want %v", got, want)
	}
}

// A labelled task fails over only among the live workers offering its
// labels: with g1 and g2 used up (per_worker 1) the run waits though n1, a
// live worker without the label, is idle; g3 joining takes it.
func testFailoverAmongLabelledWorkers(t *testing.T, open Opener) {
	h := open(t, nil)(t)
	sub := submission("2024-01-01", task("fit", failover.Limits{Attempts: 1, PerWorker: 1, Global: 3}))
	sub.Tasks[0].Labels = []string{"gpu"}
	run := submit(t, h, sub)
	registerLabels(t, h, "g1", "gpu")
	registerLabels(t, h, "g2", "gpu")
	registerLabels(t, h, "n1")
	for _, step := range []struct{ worker, want string }{{"n1", ""}, {"g1", "fit"}, {"n1", ""}, {"g1", ""}, {"g2", "fit"}, {"n1", ""}, {"g1", ""}, {"g2", ""}} {
		got := claimed(t, h, step.worker)
		if got != step.want {
			t.Fatalf("%s claimed %q, want %q", step.worker, got, step.want)
		}
		if got != "" {
			finish(t, h, step.worker, &queue.Claim{Ref: queue.Ref{Run: run, Task: got}}, queue.Result{Ending: queue.Failed})
		}
	}
	want := "task fit: waiting for a worker with labels gpu: global count 1 of 3"
	if rs, _ := status(t, h, run); rs.Waiting != want {
		t.Fatalf("waiting %q, want %q", rs.Waiting, want)
	}
	registerLabels(t, h, "g3", "gpu", "x")
	if got := claimed(t, h, "n1"); got != "" {
		t.Fatalf("n1 claimed %q", got)
	}
	if got := claimed(t, h, "g3"); got != "fit" {
		t.Fatalf("g3 claimed %q, want fit", got)
	}
	if rs, _ := status(t, h, run); rs.Waiting != "" {
		t.Fatalf("waiting %q after g3 took fit", rs.Waiting)
	}
}

// claimedAttempt submits a -> b, has w1 claim a and start its attempt
// (queued, as a visit starts one).
func claimedAttempt(t *testing.T, h Handle, l failover.Limits) (*queue.Claim, store.Attempt) {
	t.Helper()
	submit(t, h, submission("2024-01-01", task("a", l), task("b", once, "a")))
	register(t, h, "w1")
	cl := mustClaim(t, h, "w1", "a")
	a, err := h.StartAttempt(context.Background(), store.AttemptSpec{Run: cl.Run, Task: "a", Resource: "orders@2024-01-01", Worker: "w1", Queued: true})
	if err != nil {
		t.Fatal(err)
	}
	return cl, a
}

// Finish with Result.End records the attempt's end (and its process,
// Outcome.Ran) and the DAG's step in one transaction.
func testFinishRecordsTheAttemptsEnd(t *testing.T, open Opener) {
	h := open(t, nil)(t)
	ctx := context.Background()
	cl, a := claimedAttempt(t, h, once)
	ran := &store.Running{Process: store.Process{PID: 4242, PGID: 4242, Host: "host"}, Lease: time.Minute}
	reads := []store.Read{{Artifact: "raw", Interval: "2023-12-31", Version: 7, Digest: "sha256:ab"}}
	finish(t, h, "w1", cl, queue.Result{Ending: queue.Succeeded,
		End: &queue.AttemptEnd{Ref: a.AttemptRef, Outcome: store.Outcome{State: store.AttemptSucceeded, Ran: ran, Reads: reads}}})
	got, err := h.GetAttempt(ctx, a.AttemptRef)
	if err != nil || got.State != store.AttemptSucceeded || got.PID != 4242 || got.Ended.IsZero() {
		t.Fatalf("attempt after Finish: %+v, %v", got, err)
	}
	if !reflect.DeepEqual(got.Reads, reads) {
		t.Errorf("the attempt's reads after Finish: %+v, want %+v", got.Reads, reads)
	}
	if _, by := status(t, h, cl.Run); by["a"].State != queue.WorkSucceeded || by["b"].State != queue.WorkReady {
		t.Fatalf("after Finish: %+v", by)
	}
}

// When the attempt's end cannot be recorded (it was, with another outcome)
// the DAG does not move either; the end of another task's attempt is
// refused before anything.
func testFinishIsAtomic(t *testing.T, open Opener) {
	h := open(t, nil)(t)
	ctx := context.Background()
	cl, a := claimedAttempt(t, h, once)
	if _, err := h.MarkRunning(ctx, a.AttemptRef, 4242, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := h.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptFailed, Class: "x", ExitCode: 1}); err != nil {
		t.Fatal(err)
	}
	err := h.Finish(ctx, "w1", cl.Ref, queue.Result{Ending: queue.Succeeded,
		End: &queue.AttemptEnd{Ref: a.AttemptRef, Outcome: store.Outcome{State: store.AttemptSucceeded}}})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Finish over a failed attempt: %v, want store.ErrConflict", err)
	}
	if _, by := status(t, h, cl.Run); by["a"].State != queue.WorkClaimed || by["b"].State != queue.WorkBlocked {
		t.Fatalf("after a refused Finish: %+v", by)
	}
	other := a.AttemptRef
	other.Task = "b"
	if err := h.Finish(ctx, "w1", cl.Ref, queue.Result{Ending: queue.Succeeded,
		End: &queue.AttemptEnd{Ref: other, Outcome: store.Outcome{State: store.AttemptSucceeded}}}); err == nil {
		t.Fatal("Finish accepted the end of another task's attempt")
	}
}

// A claim that expired is swept with its unfinished attempts made unknown
// (a queued one would stay queued for good otherwise); the worker whose
// claim it was still records its attempt's end (its process did end) and
// learns the claim is gone; the sweep's decision stands.
func testFinishAfterTheClaimWasLost(t *testing.T, open Opener) {
	clock := newFakeClock()
	h := open(t, clock.Now)(t)
	ctx := context.Background()
	cl, a := claimedAttempt(t, h, failover.Limits{Attempts: 1, PerWorker: 1, Global: 0})
	clock.Advance(lease)
	if n, err := h.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	got, err := h.GetAttempt(ctx, a.AttemptRef)
	if err != nil || got.State != store.AttemptUnknown {
		t.Fatalf("the swept claim's queued attempt: %+v, %v; want unknown", got, err)
	}
	var reason string
	evs, _ := h.Events(ctx, cl.Run)
	for _, e := range evs {
		if e.Kind == store.EventAttemptUnknown && e.Task == "a" && e.Attempt == a.Number {
			var p struct{ Reason string }
			_ = json.Unmarshal(e.Payload, &p)
			reason = p.Reason
		}
	}
	if reason != queue.UnknownClaimExpired {
		t.Fatalf("attempt.unknown reason %q, want %q", reason, queue.UnknownClaimExpired)
	}
	// An end of another attempt of that number (another token than the
	// end assumed, or another worker's: a crash of the state took back
	// the one that ended, and a claim recorded the number anew) ends
	// nothing.
	another := a
	another.Token++
	for _, late := range []struct {
		worker string
		was    *store.Attempt
	}{{"w1", &another}, {"w2", nil}} {
		err = h.Finish(ctx, late.worker, cl.Ref, queue.Result{Ending: queue.Succeeded,
			End: &queue.AttemptEnd{Ref: a.AttemptRef, Outcome: store.Outcome{State: store.AttemptSucceeded, Was: late.was}}})
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("Finish of a lost claim by %s, its attempt another: %v, want store.ErrLeaseLost", late.worker, err)
		}
		if got, err := h.GetAttempt(ctx, a.AttemptRef); err != nil || got.State != store.AttemptUnknown {
			t.Fatalf("an end of another attempt (by %s) was recorded: %+v, %v", late.worker, got, err)
		}
	}
	err = h.Finish(ctx, "w1", cl.Ref, queue.Result{Ending: queue.Succeeded,
		End: &queue.AttemptEnd{Ref: a.AttemptRef, Outcome: store.Outcome{State: store.AttemptSucceeded}}})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Finish of a lost claim: %v, want store.ErrLeaseLost", err)
	}
	if got, err := h.GetAttempt(ctx, a.AttemptRef); err != nil || got.State != store.AttemptSucceeded {
		t.Fatalf("the attempt's end was not recorded: %+v, %v", got, err)
	}
	// global = 0: no failover; the task failed and b is not run.
	if _, by := status(t, h, cl.Run); by["a"].State != queue.WorkFailed || by["b"].State != queue.WorkNotRun {
		t.Fatalf("after the sweep and the late Finish: %+v", by)
	}
}

// A queue that claims in its Finish (queue.FinishClaimer) records the end
// exactly as Finish does and claims what the DAG's step made ready, its
// first attempt started; a Finish that fails claims nothing; a lost claim
// claims nothing and says so, its attempt's end recorded.
func testFinishClaiming(t *testing.T, open Opener) {
	clock := newFakeClock()
	h := open(t, clock.Now)(t)
	fc, ok := h.(queue.FinishClaimer)
	if !ok {
		t.Skip("the queue does not claim in its Finish")
	}
	ctx := context.Background()
	spec := store.AttemptSpec{Worker: "w1", Host: "host", Boot: "boot"}
	ran := &store.Running{Process: store.Process{PID: 4242, PGID: 4242, Host: "host"}, Lease: time.Minute}
	cl, a := claimedAttempt(t, h, failover.Limits{Attempts: 1, PerWorker: 1, Global: 0})
	// Refused (another task's attempt): nothing finished, nothing claimed.
	other := a.AttemptRef
	other.Task = "b"
	if next, err := fc.FinishClaiming(ctx, "w1", cl.Ref, queue.Result{Ending: queue.Succeeded,
		End: &queue.AttemptEnd{Ref: other, Outcome: store.Outcome{State: store.AttemptSucceeded}}}, lease, spec); err == nil || next != nil {
		t.Fatalf("FinishClaiming with another task's attempt: %+v, %v", next, err)
	}
	next, err := fc.FinishClaiming(ctx, "w1", cl.Ref, queue.Result{Ending: queue.Succeeded,
		End: &queue.AttemptEnd{Ref: a.AttemptRef, Outcome: store.Outcome{State: store.AttemptSucceeded, Ran: ran}}}, lease, spec)
	if err != nil || next == nil || next.Task != "b" || next.Attempt == nil || next.Attempt.State != store.AttemptQueued ||
		next.Attempt.Token <= a.Token || next.Attempt.Worker != "w1" {
		t.Fatalf("FinishClaiming after a: %+v, %v; want b claimed with a queued attempt", next, err)
	}
	if got, err := h.GetAttempt(ctx, a.AttemptRef); err != nil || got.State != store.AttemptSucceeded {
		t.Fatalf("a's attempt: %+v, %v", got, err)
	}
	if _, by := status(t, h, cl.Run); by["a"].State != queue.WorkSucceeded || by["b"].State != queue.WorkClaimed || by["b"].Worker != "w1" {
		t.Fatalf("after FinishClaiming: %+v", by)
	}
	// b's claim expires and is swept: its late end is recorded, and
	// nothing is claimed.
	clock.Advance(lease)
	if _, err := h.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	late, err := fc.FinishClaiming(ctx, "w1", next.Ref, queue.Result{Ending: queue.Succeeded,
		End: &queue.AttemptEnd{Ref: next.Attempt.AttemptRef, Outcome: store.Outcome{State: store.AttemptSucceeded, Ran: ran}}}, lease, spec)
	if !errors.Is(err, store.ErrLeaseLost) || late != nil {
		t.Fatalf("FinishClaiming of a lost claim: %+v, %v; want store.ErrLeaseLost", late, err)
	}
	if got, err := h.GetAttempt(ctx, next.Attempt.AttemptRef); err != nil || got.State != store.AttemptSucceeded {
		t.Fatalf("b's attempt's end was not recorded: %+v, %v", got, err)
	}
}

// sameFollowed checks that a store's FollowStatus (queue.StatusFollower,
// when it has one) with memo reads what its Status read (want).
func sameFollowed(t *testing.T, h Handle, run string, memo *queue.StatusMemo, want queue.RunStatus) {
	t.Helper()
	f, ok := h.(queue.StatusFollower)
	if !ok {
		return
	}
	got, err := f.FollowStatus(context.Background(), run, memo)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FollowStatus read\n%+v\nwhere Status read\n%+v", got, want)
	}
}

// FollowStatus, its memo kept from read to read as a follower keeps it,
// reads what Status reads after each change of the run's tasks: claims,
// a failover, a hand-back, successes, a waiting message, the run's end;
// and the same memo read for another run reads that run.
func testFollowStatus(t *testing.T, open Opener) {
	h := open(t, nil)(t)
	if _, ok := h.(queue.StatusFollower); !ok {
		t.Skip("no queue.StatusFollower")
	}
	l := failover.Limits{Attempts: 1, PerWorker: 1, Global: failover.NoLimit}
	run := submit(t, h, submission("2024-01-01", task("extract", l), task("clean", once, "extract"), task("report", once)))
	other := submit(t, h, submission("2024-01-02", task("other", once)))
	var memo queue.StatusMemo
	check := func() {
		t.Helper()
		rs, err := h.Status(context.Background(), run)
		if err != nil {
			t.Fatal(err)
		}
		sameFollowed(t, h, run, &memo, rs)
		sameFollowed(t, h, run, &memo, rs) // nothing changed in between
	}
	check()
	register(t, h, "w1", "w2")
	c := mustClaim(t, h, "w1", "extract")
	check()
	finish(t, h, "w1", c, queue.Result{Ending: queue.Failed, Reason: "boom"})
	check()
	c = mustClaim(t, h, "w2", "extract")
	check()
	if err := h.Stopping(context.Background(), "w2"); err != nil {
		t.Fatal(err)
	}
	finish(t, h, "w2", c, queue.Result{Ending: queue.HandedBack})
	check()
	// w1 had its visit, and w2 is stopping: extract waits for a worker.
	c = mustClaim(t, h, "w1", "report")
	check()
	if rs, _ := status(t, h, run); !strings.HasPrefix(rs.Waiting, queue.WaitingPrefix("extract")) {
		t.Fatalf("waiting %q", rs.Waiting)
	}
	finish(t, h, "w1", c, queue.Result{Ending: queue.Succeeded})
	check()
	register(t, h, "w3")
	rs, err := h.Status(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	sameFollowed(t, h, other, &memo, rs)
	check()
	c = mustClaim(t, h, "w3", "extract")
	finish(t, h, "w3", c, queue.Result{Ending: queue.Succeeded})
	check()
	c = mustClaim(t, h, "w3", "clean")
	finish(t, h, "w3", c, queue.Result{Ending: queue.Succeeded})
	check()
	if rs, _ := status(t, h, run); rs.Run.State != store.RunSucceeded {
		t.Fatalf("run %s", rs.Run.State)
	}
}
