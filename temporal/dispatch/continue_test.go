package dispatch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/pipec/pipec/runtime/store"
)

// layersSpec is a pipeline of layers of width tasks, each reading one
// output of the layer before (step.sh of restartFiles writes its output).
func layersSpec(pipeline string, layers, width int) (string, []string) {
	var b strings.Builder
	fmt.Fprintf(&b, "pipeline %q {\n  code_version = \"v1\"\n  schedule {\n    every = \"24h\"\n    start = \"2024-01-01T00:00:00Z\"\n  }\n", pipeline)
	var tasks []string
	for l := range layers {
		for i := range width {
			name := fmt.Sprintf("t%d_%d", l, i)
			fmt.Fprintf(&b, "  task %q {\n    command = [\"./step.sh\", %q]\n    outputs = [\"a_%s\"]\n", name, name, name)
			if l > 0 {
				fmt.Fprintf(&b, "    inputs  = [\"a_t%d_%d\"]\n", l-1, (i+l)%width)
			}
			b.WriteString("  }\n")
			tasks = append(tasks, name)
		}
	}
	b.WriteString("}\n")
	return b.String(), tasks
}

// TestContinueAsNew: a run whose history passes the (forced, small)
// threshold continues as new, again and again, with its progress carried
// over: it succeeds once, every task ran once, the executions under its
// workflow ID are the continued ones and the completed one, and each
// replays against the workflow code.
func TestContinueAsNew(t *testing.T) {
	spec, tasks := layersSpec("long", 6, 5)
	e := newEnv(t, spec, map[string]string{"step.sh": restartFiles["step.sh"]})
	e.worker("w1")
	e.worker("w2")
	t.Setenv("PIPEC_TEST_CONTINUE_AFTER", "25")
	code, run, out := e.submit("2024-01-01", true)
	if code != 0 || !strings.Contains(out, "run long/2024-01-01/r1 succeeded") {
		t.Fatalf("submit --wait: exit %d\n%s", code, out)
	}
	if r := e.until(run); r.State != store.RunSucceeded {
		t.Fatalf("run %s: %s", run, r.State)
	}
	for _, task := range tasks {
		if n := e.lines("ran", task+" "); n != 1 {
			t.Errorf("task %s ran %d times", task, n)
		}
		if as := e.attempts(run, task); len(as) != 1 || as[0].State != store.AttemptSucceeded {
			t.Errorf("task %s's attempts: %+v", task, as)
		}
	}
	wid := e.wid("long", "2024-01-01")
	resp := e.executions(wid)
	continued, completed := 0, 0
	var first *historypb.History
	for _, x := range resp.GetExecutions() {
		switch x.GetStatus() {
		case enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
			continued++
		case enums.WORKFLOW_EXECUTION_STATUS_COMPLETED:
			completed++
		default:
			t.Errorf("execution %s: %s", x.GetExecution().GetRunId(), x.GetStatus())
		}
		h := e.runHistory(wid, x.GetExecution().GetRunId())
		if x.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW &&
			h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId() == "" {
			first = h
		}
		if err := replayer(t).ReplayWorkflowHistory(nil, h); err != nil {
			t.Fatalf("replaying run %s (%d events): %v", x.GetExecution().GetRunId(), len(h.Events), err)
		}
	}
	if continued < 2 || completed != 1 {
		t.Fatalf("executions of %s: %d continued as new, %d completed", wid, continued, completed)
	}
	// The first execution (continued as new) as a
	// recorded history.
	if first != nil && os.Getenv("PIPEC_RECORD_HISTORY") == "1" {
		e.recordHistory(first, "continued")
	}
}

// runHistory is one workflow run's history.
func (e *env) runHistory(wid, rid string) *historypb.History {
	e.t.Helper()
	it := e.c.GetWorkflowHistory(context.Background(), wid, rid, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			e.t.Fatal(err)
		}
		h.Events = append(h.Events, ev)
	}
	return h
}

// recordHistory writes a history as testdata/name.history.json.
func (e *env) recordHistory(h *historypb.History, name string) {
	e.t.Helper()
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: " "}.Marshal(h)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", name+".history.json"), b, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// TestContinueAsNewEveryTurn: with a threshold every history passes, each
// execution still starts a visit before it continues as new, so the run
// ends.
func TestContinueAsNewEveryTurn(t *testing.T) {
	spec, tasks := layersSpec("tiny", 3, 1)
	e := newEnv(t, spec, map[string]string{"step.sh": restartFiles["step.sh"]})
	e.worker("w1")
	t.Setenv("PIPEC_TEST_CONTINUE_AFTER", "1")
	code, run, out := e.submit("2024-01-01", true)
	if code != 0 || !strings.Contains(out, "run tiny/2024-01-01/r1 succeeded") {
		t.Fatalf("submit --wait: exit %d\n%s", code, out)
	}
	for _, task := range tasks {
		if as := e.attempts(run, task); len(as) != 1 || as[0].State != store.AttemptSucceeded {
			t.Errorf("task %s's attempts: %+v", task, as)
		}
	}
	wid := e.wid("tiny", "2024-01-01")
	resp := e.executions(wid)
	if n := len(resp.GetExecutions()); n < 3 {
		t.Fatalf("%d executions of %s, want one per task at least", n, wid)
	}
}

// executions lists the executions of the workflow ID once the listing
// (Temporal's visibility, updated after the fact) shows one completed.
func (e *env) executions(wid string) *workflowservice.ListWorkflowExecutionsResponse {
	e.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := e.c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: "WorkflowId = '" + wid + "'"})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, x := range resp.GetExecutions() {
			if x.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
				return resp
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no completed execution of %s listed: %v", wid, resp.GetExecutions())
		}
	}
}
