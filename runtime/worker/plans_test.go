package worker

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/queue"
)

// submittedOnly is a queue that only answers Submitted, from runs: run ->
// its plan's JSON, its spec's folder and its interval.
type submittedOnly struct {
	queue.Queue
	runs  map[string][3]string
	calls int
}

func (q *submittedOnly) Submitted(_ context.Context, run string) (queue.SubmittedRun, error) {
	q.calls++
	r := q.runs[run]
	return queue.SubmittedRun{Plan: []byte(r[0]), BaseDir: r[1], Interval: r[2]}, nil
}

// TestPlansDecodedOncePerContent: the runs of one plan, submitted from one
// folder (a backfill's), share the plan decoded once and its setup; a run
// is read from the queue once; another plan, or the same plan from another
// folder, is decoded for itself.
func TestPlansDecodedOncePerContent(t *testing.T) {
	encode := func(p compiler.Plan) string {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	one := encode(compiler.Plan{Pipeline: "p", Tasks: []compiler.PlanTask{{Name: "a", Command: []string{"true"}}}})
	two := encode(compiler.Plan{Pipeline: "p", Tasks: []compiler.PlanTask{{Name: "b", Command: []string{"true"}}}})
	q := &submittedOnly{runs: map[string][3]string{
		"r1": {one, "/spec", "2024-01-01"},
		"r2": {one, "/spec", "2024-01-02"},
		"r3": {one, "/other", "2024-01-01"},
		"r4": {two, "/spec", "2024-01-01"},
	}}
	c := &Config{Queue: q, plans: newPlanCache()}
	get := func(run string) *submitted {
		t.Helper()
		s, err := c.plan(context.Background(), run)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	r1, r2, r3, r4 := get("r1"), get("r2"), get("r3"), get("r4")
	if r1.plan != r2.plan || r1.setup != r2.setup || r1.setup == nil {
		t.Errorf("two runs of one plan: plans %p %p, setups %p %p; want one of each", r1.plan, r2.plan, r1.setup, r2.setup)
	}
	if r1.interval != "2024-01-01" || r2.interval != "2024-01-02" {
		t.Errorf("intervals %q %q", r1.interval, r2.interval)
	}
	if r3.plan == r1.plan || r3.setup == r1.setup || r3.baseDir != "/other" {
		t.Errorf("the plan from another folder shares the first's (%p %p)", r3.plan, r3.setup)
	}
	if r4.plan == r1.plan || r4.plan.Tasks[0].Name != "b" {
		t.Errorf("another plan: %+v", r4.plan.Tasks)
	}
	if again := get("r1"); again != r1 || q.calls != 4 {
		t.Errorf("r1 again: %p (first %p), %d reads of the queue; want the first and 4", again, r1, q.calls)
	}
}

// TestBoundedKeepsTheLast: a bounded map forgets its oldest entries.
func TestBoundedKeepsTheLast(t *testing.T) {
	b := newBounded[int, string](2)
	b.add(1, "a")
	b.add(2, "b")
	b.add(1, "a2") // already there: not added again
	b.add(3, "c")
	if _, ok := b.get(1); ok {
		t.Error("1 kept past the bound")
	}
	if v, ok := b.get(2); !ok || v != "b" {
		t.Errorf("2: %q %v", v, ok)
	}
	if v, ok := b.get(3); !ok || v != "c" {
		t.Errorf("3: %q %v", v, ok)
	}
}
