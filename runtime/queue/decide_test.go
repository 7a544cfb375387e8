package queue

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pipec/pipec/internal/failover"
	"github.com/pipec/pipec/runtime/store"
)

func TestPlan(t *testing.T) {
	l := failover.Limits{Attempts: 1, Global: failover.NoLimit, NoFailover: true}
	rows, err := Plan(Submission{Tasks: []Task{
		{Name: "load", Needs: []string{"clean", "extract"}, Limits: l, Labels: []string{"spark", "gpu", "spark"}},
		{Name: "extract", Limits: l},
		{Name: "clean", Needs: []string{"extract"}, Limits: l},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []NewWork{
		{Task: "load", State: WorkBlocked, WaitingOn: 2, Dependents: []string{}, Limits: l, Labels: []string{"gpu", "spark"}},
		{Task: "extract", State: WorkReady, Dependents: []string{"clean", "load"}, Limits: l, Labels: []string{}},
		{Task: "clean", State: WorkBlocked, WaitingOn: 1, Dependents: []string{"load"}, Limits: l, Labels: []string{}},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Fatalf("Plan (-want +got):\n%s", diff)
	}
	for _, bad := range []struct {
		sub  Submission
		want string
	}{
		{Submission{}, "the plan has no tasks"},
		{Submission{Tasks: []Task{{Name: "a", Needs: []string{"b"}}}}, "task a needs b, which the plan does not have"},
		{Submission{Tasks: []Task{{Name: "a"}, {Name: "a"}}}, "task a is in the plan twice"},
	} {
		if _, err := Plan(bad.sub); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Plan(%+v) = %v, want %q", bad.sub, err, bad.want)
		}
	}
}

// The second worked case step by step: per_worker 2, global 4 on w1, w2;
// after four failed visits no live worker may start the task.
func TestChooseWaitsThenJoined(t *testing.T) {
	l := failover.Limits{Attempts: 1, PerWorker: 2, Global: 4}
	live := []string{"w1", "w2"}
	w := Work{Ref: Ref{Run: "r1", Task: "extract"}, Limits: l, Live: live}
	var starts []string
	for len(starts) < 10 {
		var worker string
		for _, cand := range live {
			cands := []Work{w}
			p, err := Choose(cands, cand)
			if err != nil {
				t.Fatal(err)
			}
			if p.Chosen == 0 {
				// Choose stepped the candidate: take it, as a store
				// writes it back.
				worker, w = cand, cands[0]
				break
			}
		}
		if worker == "" {
			break
		}
		starts = append(starts, worker)
		c, err := Finished(&w, worker, Result{Ending: Failed})
		if err != nil {
			t.Fatal(err)
		}
		if c.State != WorkReady || c.Notes[0].Kind != EventWorkFailover {
			t.Fatalf("after start %d: %+v", len(starts), c)
		}
	}
	if got := strings.Join(starts, " "); got != "w1 w2 w1 w2" {
		t.Fatalf("starts %q, want w1 w2 w1 w2", got)
	}
	p, err := Choose([]Work{w, {Ref: Ref{Run: "r2", Task: "x"}, Limits: l, Live: live}}, "w1")
	if err != nil {
		t.Fatal(err)
	}
	want := []Waiting{{Run: "r1", Task: "extract", Message: "task extract: waiting for a worker: global count 3 of 4"}}
	if p.Chosen != 1 || !cmp.Equal(p.Waiting, want) {
		t.Fatalf("Choose = %+v, want r2's task chosen and r1 waiting: %+v", p, want)
	}
	// A worker not live (or not offering the labels) claims nothing and
	// judges nothing.
	if p, _ := Choose([]Work{w}, "w9"); p.Chosen != -1 || p.Waiting != nil {
		t.Fatalf("a worker not live: %+v", p)
	}
	// w3 joins: one more start there, then the fifth failover stops it.
	w.Live = append(live, "w3")
	cands := []Work{w}
	if p, _ = Choose(cands, "w3"); p.Chosen != 0 {
		t.Fatalf("w3 may not start the waiting task: %+v", p)
	}
	w = cands[0]
	c, _ := Finished(&w, "w3", Result{Ending: Failed, Reason: "exit 1"})
	if c.State != WorkFailed || c.Spread != SpreadFailed || c.Reason != "exit 1; stopped: another failover would exceed global = 4" {
		t.Fatalf("after w3: %+v", c)
	}
}

func TestHandedBackCountsNowhere(t *testing.T) {
	l := failover.Limits{Attempts: 1, PerWorker: 1, Global: 0}
	w := Work{Ref: Ref{Run: "r", Task: "t"}, Limits: l, Live: []string{"w2"}}
	if err := w.Failover.Start(l, "w1", []string{"w1", "w2"}); err != nil {
		t.Fatal(err)
	}
	c, err := Finished(&w, "w1", Result{Ending: HandedBack})
	if err != nil {
		t.Fatal(err)
	}
	if c.State != WorkReady || w.Failover.Starts != 0 || w.Failover.Failovers != 0 || len(w.Failover.Visits) != 0 {
		t.Fatalf("handed back: %+v, state %+v", c, w.Failover)
	}
	if p, _ := Choose([]Work{w}, "w2"); p.Chosen != 0 {
		t.Fatal("w2 may not take a handed-back task with global = 0")
	}
	if c.Reason != "handed back by w1 (shutting down)" {
		t.Errorf("reason %q", c.Reason)
	}
	// A worker that could not begin the task says why: it is not shutting
	// down, and an operator reading the reason must not think so.
	if err := w.Failover.Start(l, "w1", []string{"w1", "w2"}); err != nil {
		t.Fatal(err)
	}
	if c, _ := Finished(&w, "w1", Result{Ending: HandedBack, Reason: "its plan could not be read"}); c.Reason != "handed back by w1 (its plan could not be read)" || c.State != WorkReady {
		t.Errorf("handed back unbegun: %+v", c)
	}
}

func TestExpired(t *testing.T) {
	l := failover.Limits{Attempts: 1, Global: failover.NoLimit, NoFailover: true}
	w := Work{Ref: Ref{Run: "r", Task: "t"}, Limits: l, Worker: "w1"}
	_ = w.Failover.Start(l, "w1", []string{"w1"})
	c := Expired(&w)
	kinds := []string{}
	for _, n := range c.Notes {
		kinds = append(kinds, n.Kind)
	}
	if c.State != WorkReady || !cmp.Equal(kinds, []string{EventWorkLeaseLost, EventWorkFailover}) ||
		c.Reason != "the lease of w1 expired (no heartbeat): its attempt is unknown" || w.Failover.Pending != failover.Free {
		t.Fatalf("Expired = %+v (%v), state %+v", c, kinds, w.Failover)
	}
}

// Labels: a worker outside a candidate's Live is passed over; a labelled
// task no live worker offers the labels of waits, "none is live".
func TestChooseLabels(t *testing.T) {
	live := []WorkerInfo{{Name: "w1"}, {Name: "w2", Labels: []string{"gpu", "spark"}}}
	spark := Work{Ref: Ref{Run: "r1", Task: "aggregate"}, Limits: once, Labels: []string{"spark"}}
	spark.Live = EligibleLive(spark.Labels, live)
	plain := Work{Ref: Ref{Run: "r1", Task: "extract"}, Limits: once, Live: EligibleLive(nil, live)}
	if !cmp.Equal(spark.Live, []string{"w2"}) || !cmp.Equal(plain.Live, []string{"w1", "w2"}) {
		t.Fatalf("eligible: %v, %v", spark.Live, plain.Live)
	}
	p, _ := Choose([]Work{spark, plain}, "w1")
	if p.Chosen != 1 {
		t.Fatalf("w1 chose %d, want the task without labels", p.Chosen)
	}
	cands := []Work{spark, plain}
	if p, _ = Choose(cands, "w2"); p.Chosen != 0 {
		t.Fatalf("w2 chose %d, want the spark task", p.Chosen)
	}
	p = Pick{Chosen: -1}
	p.Unserved([]Work{{Ref: Ref{Run: "r2", Task: "train"}, Labels: []string{"tpu"}}, {Ref: Ref{Run: "r2", Task: "z"}, Labels: []string{"x"}}})
	want := []Waiting{{Run: "r2", Task: "train", Message: "task train: waiting for a worker with labels tpu (none is live)"}}
	if !cmp.Equal(p.Waiting, want) {
		t.Fatalf("unserved: %+v, want %+v", p.Waiting, want)
	}
}

var once = failover.Limits{Attempts: 1, Global: failover.NoLimit, NoFailover: true}

func TestSpread(t *testing.T) {
	// a -> b -> d, a -> c -> d: d is reached twice, marked once.
	deps := map[string][]string{"b": {"d"}, "c": {"d"}, "d": {}}
	marked := map[string]string{}
	var order []string
	err := Spread("a", []string{"b", "c"}, SpreadFailed, func(task, why string) ([]string, bool, error) {
		if _, ok := marked[task]; ok {
			return nil, false, nil
		}
		marked[task] = why
		order = append(order, task)
		return deps[task], true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"b": "needs a, which failed", "c": "needs a, which failed", "d": "needs b, which was not run"}
	if !cmp.Equal(marked, want) || strings.Join(order, "") != "bcd" {
		t.Fatalf("marked %v in order %v, want %v", marked, order, want)
	}
}

func TestRunEnd(t *testing.T) {
	for _, c := range []struct {
		open, bad int
		state     store.RunState
		over      bool
	}{{1, 0, store.RunRunning, false}, {1, 1, store.RunRunning, false}, {0, 0, store.RunSucceeded, true}, {0, 2, store.RunFailed, true}} {
		if s, over := RunEnd(c.open, c.bad); s != c.state || over != c.over {
			t.Errorf("RunEnd(%d, %d) = %s, %v; want %s, %v", c.open, c.bad, s, over, c.state, c.over)
		}
	}
}

func TestAttachWork(t *testing.T) {
	ws := []WorkerRow{{WorkerInfo: WorkerInfo{Name: "w1"}}, {WorkerInfo: WorkerInfo{Name: "w2"}}}
	l := failover.Limits{Attempts: 1, PerWorker: 2, Global: 4}
	st := failover.State{Visits: map[string]int{"w2": 1, "w1": 2, "gone": 1}}
	AttachWork(ws, []RunTask{
		{Run: "r1", TaskStatus: TaskStatus{Task: "a", State: WorkClaimed, Worker: "w2", Limits: l, Failover: st}},
		{Run: "r1", TaskStatus: TaskStatus{Task: "b", State: WorkClaimed, Worker: "w1", Limits: failover.Limits{NoFailover: true},
			Failover: failover.State{Visits: map[string]int{"w1": 1}}}},
	})
	if !cmp.Equal(ws[0].Running, []string{"r1 b"}) || !cmp.Equal(ws[0].Failover, []string{"r1 a: 2 of 2"}) ||
		!cmp.Equal(ws[1].Running, []string{"r1 a"}) || !cmp.Equal(ws[1].Failover, []string{"r1 a: 1 of 2"}) {
		t.Fatalf("workers %+v", ws)
	}
}

// Choose over candidates a page at a time, merged, decides what Choose over
// them all does.
func TestChoosePagesMerge(t *testing.T) {
	l := failover.Limits{Attempts: 1, PerWorker: 1, Global: 3}
	waitingTask := func(run, task string) Work {
		w := Work{Ref: Ref{Run: run, Task: task}, Limits: l, Live: []string{"w1"}}
		_ = w.Failover.Start(l, "w1", w.Live)
		w.Failover.Failed(l, false, false)
		return w
	}
	all := []Work{waitingTask("r1", "a"), waitingTask("r3", "a"), waitingTask("r1", "b"), waitingTask("r2", "a"),
		{Ref: Ref{Run: "r4", Task: "x"}, Limits: once, Live: []string{"w1"}}}
	whole, err := Choose(append([]Work(nil), all...), "w1")
	if err != nil {
		t.Fatal(err)
	}
	var merged []Waiting
	chosen := -1
	for i := 0; i < len(all) && chosen < 0; i += 2 {
		page := all[i:min(i+2, len(all))]
		p, err := Choose(page, "w1")
		if err != nil {
			t.Fatal(err)
		}
		merged = MergeWaiting(merged, p.Waiting)
		if p.Chosen >= 0 {
			chosen = i + p.Chosen
		}
	}
	if chosen != whole.Chosen || !cmp.Equal(merged, whole.Waiting) {
		t.Fatalf("pages chose %d waiting %+v; all at once %d %+v", chosen, merged, whole.Chosen, whole.Waiting)
	}
	if runs := []string{merged[0].Run, merged[1].Run, merged[2].Run}; !cmp.Equal(runs, []string{"r1", "r2", "r3"}) || merged[0].Task != "a" {
		t.Fatalf("waiting %+v, want r1 (task a), r2, r3", merged)
	}
}
