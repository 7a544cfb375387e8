// Package queuetest holds checks every queue.Queue must pass, whatever the
// store behind it (PostgreSQL, SQLite): each store's tests call them with a
// function that opens a fresh store.
package queuetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/failover"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// Store is what the checks need: the queue, and the store's event log.
type Store interface {
	store.Store
	queue.Queue
}

// eventRunWaiting is the kind of the event a run records when it starts
// waiting for a worker (schema/events.schema.json).
const eventRunWaiting = "run.waiting"

// Labels checks worker labels: claims filtered by the labels a worker
// offers, failover among the eligible workers only, and the waiting
// messages that name the labels. open returns a fresh, empty store.
func Labels(t *testing.T, open func(t *testing.T) Store) {
	t.Run("ClaimFiltersByLabels", func(t *testing.T) { claimFiltersByLabels(t, open(t)) })
	t.Run("FailoverAmongEligibleWorkers", func(t *testing.T) { failoverAmongEligibleWorkers(t, open(t)) })
}

// labelsWorld is a store with one submitted run of tasks and registered
// workers, for the claim's label filter.
type labelsWorld struct {
	t   *testing.T
	ctx context.Context
	s   Store
	run string
}

const labelsLease = time.Minute

func newLabelsWorld(t *testing.T, s Store, tasks ...queue.Task) *labelsWorld {
	t.Helper()
	w := &labelsWorld{t: t, ctx: context.Background(), s: s}
	r, err := w.s.Submit(w.ctx, queue.Submission{
		Run:  store.NewRun{Pipeline: "p", Interval: "2024-01-01", CodeVersion: "1", PlanDigest: "sha256:x"},
		Plan: []byte("{}"), BaseDir: "/spec", Interval: "2024-01-01", Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	w.run = r.ID
	return w
}

func (w *labelsWorld) register(name string, labels ...string) {
	w.t.Helper()
	if err := w.s.Register(w.ctx, queue.WorkerInfo{Name: name, Host: "h", PID: 1, Slots: 1, Labels: labels}, labelsLease); err != nil {
		w.t.Fatal(err)
	}
}

// claim claims as worker and returns the task's name, "" for nothing.
func (w *labelsWorld) claim(worker string) string {
	w.t.Helper()
	c, err := w.s.Claim(w.ctx, worker, labelsLease)
	if err != nil {
		w.t.Fatal(err)
	}
	if c == nil {
		return ""
	}
	return c.Task
}

func (w *labelsWorld) waiting() string {
	w.t.Helper()
	rs, err := w.s.Status(w.ctx, w.run)
	if err != nil {
		w.t.Fatal(err)
	}
	return rs.Waiting
}

func (w *labelsWorld) fail(worker, task string) {
	w.t.Helper()
	if err := w.s.Finish(w.ctx, worker, queue.Ref{Run: w.run, Task: task}, queue.Result{Ending: queue.Failed, Reason: "exit 1"}); err != nil {
		w.t.Fatal(err)
	}
}

// waitingEvents are the run.waiting events' messages, in order.
func (w *labelsWorld) waitingEvents() []string {
	w.t.Helper()
	evs, err := w.s.Events(w.ctx, w.run)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Kind == eventRunWaiting {
			out = append(out, string(e.Payload))
		}
	}
	return out
}

// claimFiltersByLabels: a worker claims only the tasks whose labels it
// offers all of; a labelled task no live worker offers the labels of makes
// the run say so, and a worker with them that registers takes it.
func claimFiltersByLabels(t *testing.T, s Store) {
	one := failover.Limits{Attempts: 1, Global: failover.NoLimit, NoFailover: true}
	w := newLabelsWorld(t, s,
		queue.Task{Name: "a", Labels: []string{"a"}, Limits: one},
		queue.Task{Name: "b", Labels: []string{"b", "spark"}, Limits: one},
		queue.Task{Name: "u", Limits: one})
	w.register("w1", "a", "x")
	w.register("w0") // no labels: only unlabelled tasks
	if got := w.claim("w0"); got != "u" {
		t.Errorf("w0 (no labels) claimed %q, want u", got)
	}
	if got := w.claim("w0"); got != "" {
		t.Errorf("w0 (no labels) claimed %q, want nothing", got)
	}
	if got := w.claim("w1"); got != "a" {
		t.Errorf("w1 (a, x) claimed %q, want a", got)
	}
	if got := w.claim("w1"); got != "" {
		t.Errorf("w1 (a, x) claimed %q, want nothing", got)
	}
	want := "task b: waiting for a worker with labels b,spark (none is live)"
	if got := w.waiting(); got != want {
		t.Errorf("waiting = %q, want %q", got, want)
	}
	w.register("w2", "b") // one of two labels is not enough
	if got := w.claim("w2"); got != "" {
		t.Errorf("w2 (b) claimed %q, want nothing", got)
	}
	if got := w.waiting(); got != want {
		t.Errorf("waiting = %q, want %q (w2 lacks spark)", got, want)
	}
	w.register("w3", "spark", "b", "b", "gpu") // given unsorted, with a duplicate
	if got := w.claim("w3"); got != "b" {
		t.Errorf("w3 (b, gpu, spark) claimed %q, want b", got)
	}
	if got := w.waiting(); got != "" {
		t.Errorf("waiting = %q after b was claimed, want none", got)
	}
	if got := w.waitingEvents(); len(got) != 1 || !strings.Contains(got[0], want) {
		t.Errorf("run.waiting events = %q, want one with %q", got, want)
	}
	ws, err := w.s.Workers(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for _, x := range ws {
		labels[x.Name] = strings.Join(x.Labels, ",")
	}
	if labels["w3"] != "b,gpu,spark" || labels["w0"] != "" || labels["w1"] != "a,x" {
		t.Errorf("workers' labels = %q", labels)
	}
}

// failoverAmongEligibleWorkers: a labelled task fails over only among
// the live workers offering its labels, and "every live worker exhausted"
// counts only those: with g1 and g2 used up, a live worker without the
// label does not keep the run from waiting, nor does it take the task.
func failoverAmongEligibleWorkers(t *testing.T, s Store) {
	w := newLabelsWorld(t, s, queue.Task{Name: "f", Labels: []string{"gpu"},
		Limits: failover.Limits{Attempts: 1, PerWorker: 1, Global: 3}})
	w.register("g1", "gpu")
	w.register("g2", "gpu")
	w.register("n1")
	if got := w.claim("n1"); got != "" {
		t.Fatalf("n1 (no labels) claimed %q", got)
	}
	if got := w.claim("g1"); got != "f" {
		t.Fatalf("g1 claimed %q, want f", got)
	}
	w.fail("g1", "f")
	if got := w.claim("n1"); got != "" {
		t.Fatalf("n1 (no labels) claimed %q after a failover", got)
	}
	if got := w.claim("g1"); got != "" {
		t.Fatalf("g1 claimed %q again while g2 has a visit left", got)
	}
	if got := w.claim("g2"); got != "f" {
		t.Fatalf("g2 claimed %q, want f", got)
	}
	w.fail("g2", "f")
	for _, name := range []string{"n1", "g1", "g2"} {
		if got := w.claim(name); got != "" {
			t.Fatalf("%s claimed %q with every eligible worker used up", name, got)
		}
	}
	want := "task f: waiting for a worker with labels gpu: global count 1 of 3"
	if got := w.waiting(); got != want {
		t.Errorf("waiting = %q, want %q", got, want)
	}
	w.register("g3", "gpu", "x")
	if got := w.claim("n1"); got != "" {
		t.Fatalf("n1 (no labels) claimed %q", got)
	}
	if got := w.claim("g3"); got != "f" {
		t.Fatalf("g3 (gpu, x) claimed %q, want f", got)
	}
	if got := w.waiting(); got != "" {
		t.Errorf("waiting = %q after g3 took f", got)
	}
}
