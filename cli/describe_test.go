package cli

import (
	"strings"
	"testing"

	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/store"
)

// An event recorded without one of its fields (an older pipec, a path that
// has no reason to give) prints without it: never "class start, ", "()" or
// a line ending in ": ".
func TestDescribeEventNoEmptyItems(t *testing.T) {
	kinds := []string{
		store.EventRunCreated, runtime.EventRunSuperseded, runtime.EventSinkReconciled, store.EventAttemptRunning,
		store.EventAttemptFinished, store.EventAttemptUnknown, runtime.EventAttemptRetry, runtime.EventAttemptLease,
		runtime.EventZombieKilled, runtime.EventTaskSucceeded, runtime.EventTaskReused, runtime.EventTaskFailed,
		runtime.EventTaskNotRun, runtime.EventOrphansEnded, runtime.EventAttemptBlocked, runtime.EventAttemptAdopted,
		runtime.EventCheckFailed, runtime.EventPublishFailed,
	}
	for _, kind := range kinds {
		for _, data := range []map[string]any{{}, {"state": "failed"}, {"state": "failed", "class": "start"}} {
			line := describeEventText(runtime.Event{Kind: kind, Task: "extract", Attempt: 1, Data: data})
			if strings.Contains(line, "()") || strings.Contains(line, ", )") || strings.Contains(line, "; )") ||
				strings.HasSuffix(line, ", ") || strings.HasSuffix(line, ": ") || strings.HasSuffix(line, "; ") ||
				strings.Contains(line, " , ") || strings.Contains(line, ", ,") {
				t.Errorf("%s %v: %q has an empty item", kind, data, line)
			}
		}
	}
	// The start failure of an older pipec (no "why"): its error says why.
	got := describeEventText(runtime.Event{Kind: store.EventAttemptFinished, Task: "extract", Attempt: 1,
		Data: map[string]any{"state": "failed", "class": "start", "error": "./extract.sh: no such file or directory"}})
	if want := "extract#1 failed: class start, ./extract.sh: no such file or directory"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// The run summary likewise: a task or publish without a reason prints none.
func TestSummaryNoEmptyItems(t *testing.T) {
	s := &runtime.Summary{Tasks: []runtime.TaskResult{{Name: "a", State: runtime.TaskNotRun}, {Name: "b", State: runtime.TaskReused}},
		Publish: []runtime.PublishResult{{Name: "p", Sink: "s", Outcome: runtime.PublishNotRun}}}
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "()") {
		t.Errorf("empty item in\n%s", b.String())
	}
}
