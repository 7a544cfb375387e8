package dispatch_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/pipec/pipec/temporal/dispatch"
)

// The workflow must pass Temporal's determinism checks: a recorded history
// replays against today's workflow code without a command that differs
// (a nondeterminism error). testdata/*.history.json are histories recorded
// by the end-to-end tests (PIPEC_RECORD_HISTORY=1 rewrites them): a run
// that succeeds, one whose task fails over until it waits for a worker and
// a third joins, one cancelled, one whose worker was killed mid-task, one
// whose first visit was given up while its worker was paused. Each
// end-to-end test that records also replays its live history.

func replayer(t testing.TB) worker.WorkflowReplayer {
	t.Helper()
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(dispatch.RunWorkflow, workflow.RegisterOptions{Name: dispatch.WorkflowName})
	return r
}

// TestReplayRecordedHistories replays the recorded histories.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.history.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories in testdata (PIPEC_RECORD_HISTORY=1 go test ./dispatch/ records them)")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".history.json"), func(t *testing.T) {
			if err := replayer(t).ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replaying %s: %v", f, err)
			}
		})
	}
}

// replay replays the interval's workflow's live history and, with
// PIPEC_RECORD_HISTORY=1, records it as testdata/name.history.json.
func (e *env) replay(pipeline, interval, name string) {
	e.t.Helper()
	it := e.c.GetWorkflowHistory(context.Background(), e.wid(pipeline, interval), "", false,
		enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			e.t.Fatal(err)
		}
		h.Events = append(h.Events, ev)
	}
	if err := replayer(e.t).ReplayWorkflowHistory(nil, h); err != nil {
		e.t.Fatalf("replaying the workflow's history (%d events): %v", len(h.Events), err)
	}
	if os.Getenv("PIPEC_RECORD_HISTORY") != "1" {
		return
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: " "}.Marshal(h)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", name+".history.json"), b, 0o644); err != nil {
		e.t.Fatal(err)
	}
}
