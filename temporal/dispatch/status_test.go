package dispatch_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
)

// pipec status shows a run on Temporal waiting for a worker as it shows a
// run on the state's queue: a line under the run, and "waiting" in --json,
// read from the run.waiting event the workflow records; once a worker
// joins and takes the task, the line is gone.
func TestStatusWaitingForAWorker(t *testing.T) {
	e := newEnv(t, failingSpec(4), failFiles)
	e.worker("w1")
	e.worker("w2")
	_, run, _ := e.submit("2024-01-01", false)
	const want = "task extract: waiting for a worker: global count 3 of 4"
	out := e.statusUntil(func(out string) bool { return strings.Contains(out, want) })
	if !strings.Contains(out, run+"  running\n  "+want+"\n") {
		t.Fatalf("pipec status:\n%s\nwant the run running, then %q", out, want)
	}
	if w := e.statusJSON(run).Waiting; w != want {
		t.Fatalf("pipec status --json: waiting %q, want %q", w, want)
	}
	// The workflow says the same.
	if w := e.status("seed", "2024-01-01").Waiting; w != want {
		t.Fatalf("the workflow's status: waiting %q, want %q", w, want)
	}
	e.worker("w3")
	if r := e.until(run); r.State != store.RunFailed {
		t.Fatalf("run %s, want failed", r.State)
	}
	if _, out := e.run(pipecBin, "status", "--state", e.url); strings.Contains(out, "waiting for a worker") {
		t.Fatalf("a finished run still waits:\n%s", out)
	}
}

// statusUntil runs pipec status until ok says its output is what the test
// waits for, and returns it.
func (e *env) statusUntil(ok func(string) bool) string {
	e.t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		code, out := e.run(pipecBin, "status", "--state", e.url)
		if code == 0 && ok(out) {
			return out
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("pipec status never showed what the test waits for:\n%s", out)
		}
	}
}

// statusJSON is pipec status --json's entry of run.
func (e *env) statusJSON(run string) (r struct{ ID, State, Waiting string }) {
	e.t.Helper()
	code, out := e.run(pipecBin, "status", "--state", e.url, "--json")
	var doc struct {
		Runs []struct{ ID, State, Waiting string }
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil {
		e.t.Fatalf("pipec status --json: exit %d, %v\n%s", code, err, out)
	}
	for _, x := range doc.Runs {
		if x.ID == run {
			return x
		}
	}
	e.t.Fatalf("pipec status --json lists no run %s:\n%s", run, out)
	return
}
