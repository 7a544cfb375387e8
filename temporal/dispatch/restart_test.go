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
	"go.temporal.io/api/workflowservice/v1"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// restartSpec: a non-idempotent charge that holds until the file release
// exists, ten steps reading its receipt, and a final task reading them all.
func restartSpec() (string, []string) {
	var b strings.Builder
	b.WriteString(`pipeline "restart" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "charge" {
    command    = ["./charge.sh"]
    effects    = ["charge"]
    idempotent = false
    outputs    = ["receipt"]
  }
`)
	tasks := []string{"charge"}
	var finalIn []string
	for i := range 10 {
		name := fmt.Sprintf("t%d", i)
		fmt.Fprintf(&b, "  task %q {\n    command = [\"./step.sh\", %q]\n    inputs  = [\"receipt\"]\n    outputs = [\"a_%s\"]\n  }\n", name, name, name)
		tasks = append(tasks, name)
		finalIn = append(finalIn, fmt.Sprintf("%q", "a_"+name))
	}
	fmt.Fprintf(&b, "  task \"final\" {\n    command = [\"./step.sh\", \"final\"]\n    inputs  = [%s]\n    outputs = [\"a_final\"]\n  }\n}\n",
		strings.Join(finalIn, ", "))
	return b.String(), append(tasks, "final")
}

var restartFiles = map[string]string{
	"charge.sh": `#!/bin/sh
echo "charge $PIPEC_RUN_ID $PIPEC_WORKER" >> ledger
touch charging
while [ ! -f release ] && [ -f charge.sh ]; do sleep 0.05; done
printf 'id\n1\n' > "$PIPEC_OUTPUT_receipt/r.csv"
`,
	"step.sh": `#!/bin/sh
sleep 0.2
echo "$1 $PIPEC_RUN_ID $PIPEC_WORKER" >> ran
eval "out=\$PIPEC_OUTPUT_a_$1"
printf 'id\n1\n' > "$out/data.csv"
`,
}

// TestServerRestartMidRun: the Temporal server (its history in an SQLite
// file, as temporal server start-dev --db-filename keeps it) is killed
// with SIGKILL while a non-idempotent task runs, the task ends while the
// server is down, and the server starts again on the same file and port.
// The worker processes ride the outage (shorter than their --unreachable
// grace and the visits' heartbeat timeout): the run goes on and succeeds
// once, under its workflow ID, with every task run and accepted once and
// the charge made once.
func TestServerRestartMidRun(t *testing.T) {
	testServerOutageMidRun(t, "restarted", 2*time.Second, func(srv *devServer) (up func()) {
		srv.kill()
		return srv.start
	})
}

// TestServerFrozenMidRun is TestServerRestartMidRun with the server
// stopped (SIGSTOP) instead of killed, its connections open, as a hung
// server or a network that drops packets looks to its clients: the
// workers' calls to it wait instead of being refused.
func TestServerFrozenMidRun(t *testing.T) {
	testServerOutageMidRun(t, "frozen", 8*time.Second, func(srv *devServer) (up func()) {
		srv.freeze()
		return srv.thaw
	})
}

// testServerOutageMidRun ends the server's service with down (which returns
// what brings it back) once the charge runs, lets the charge end, and
// brings the server back after outage; the workflow's history replays, and
// is kept as testdata/<history>.history.json when recording (replay).
func testServerOutageMidRun(t *testing.T, history string, outage time.Duration, down func(*devServer) (up func())) {
	needServer(t)
	srv := startDevServer(t, filepath.Join(t.TempDir(), "temporal.db"), freePort(t))
	spec, tasks := restartSpec()
	e := newEnvOnServer(t, srv, spec, restartFiles)
	for _, name := range []string{"w1", "w2"} {
		e.worker(name, "--unreachable", "30s")
	}
	code, run, out := e.submit("2024-01-01", false, "--heartbeat", "30s")
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	e.waitFile("charging")
	up := down(srv)
	gone := time.Now()
	if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(outage) // the charge ends while the server is out
	up()
	back := time.Now()
	t.Logf("the server was out %s", back.Sub(gone).Round(100*time.Millisecond))

	if r := e.until(run); r.State != store.RunSucceeded {
		t.Fatalf("run %s: %s", run, r.State)
	}
	t.Logf("the run ended %s after the server was back", time.Since(back).Round(100*time.Millisecond))
	if n := e.lines("ledger", "charge "); n != 1 {
		t.Fatalf("the charge was made %d times", n)
	}
	ctx := context.Background()
	for _, task := range tasks {
		if task != "charge" {
			if n := e.lines("ran", task+" "); n != 1 {
				t.Errorf("task %s ran %d times", task, n)
			}
		}
		as := e.attempts(run, task)
		if len(as) != 1 || as[0].State != store.AttemptSucceeded {
			t.Errorf("task %s's attempts: %+v", task, as)
		}
		art := "a_" + task
		if task == "charge" {
			art = "receipt"
		}
		v, err := e.st.AcceptedVersion(ctx, "restart", art, "2024-01-01")
		if err != nil || v.Run != run || v.Task != task || v.Attempt != 1 {
			t.Errorf("%s's accepted version: %+v, %v", art, v, err)
		}
	}
	runs, err := e.st.ListRuns(ctx, store.RunFilter{Pipeline: "restart"})
	if err != nil || len(runs) != 1 {
		t.Fatalf("the state's runs of the pipeline: %+v, %v", runs, err)
	}
	// One workflow execution under the run's workflow ID, completed.
	// (The state's run ends just before its workflow does, and the
	// listing follows the workflow's end.)
	wid := e.wid("restart", "2024-01-01")
	if err := e.c.GetWorkflow(ctx, wid, "").Get(ctx, nil); err != nil {
		t.Fatalf("workflow %s: %v", wid, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := e.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: "WorkflowId = '" + wid + "'"})
		if err != nil {
			t.Fatal(err)
		}
		xs := resp.GetExecutions()
		if len(xs) == 1 && xs[0].GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			break
		}
		if len(xs) > 1 || time.Now().After(deadline) {
			t.Fatalf("workflow executions of %s: %v", wid, xs)
		}
	}
	e.replay("restart", "2024-01-01", history)
}

// TestServerOutagePastGrace: the server is down longer than the workers'
// --unreachable grace while the non-idempotent charge runs. The worker
// stops the visit (its process with it), as a lost lease, and stays up;
// (the SDK cancels a visit whose heartbeats do not get through for the
// heartbeat timeout; the worker stops what is left past its grace); once
// the server is back, Temporal times the silent visit out and the
// workflow judges it lost: the charge is not made again, and the run
// names pipec resolve.
func TestServerOutagePastGrace(t *testing.T) {
	testServerOutagePastGrace(t, func(srv *devServer) (up func()) {
		srv.kill()
		return srv.start
	})
}

// TestServerFrozenPastGrace is TestServerOutagePastGrace with the server
// stopped (SIGSTOP), its connections open: the workers' calls wait instead
// of being refused.
func TestServerFrozenPastGrace(t *testing.T) {
	testServerOutagePastGrace(t, func(srv *devServer) (up func()) {
		srv.freeze()
		return srv.thaw
	})
}

// testServerOutagePastGrace ends the server's service with down (which
// returns what brings it back) while the charge runs, until its worker
// stopped the visit.
func testServerOutagePastGrace(t *testing.T, down func(*devServer) (up func())) {
	needServer(t)
	srv := startDevServer(t, filepath.Join(t.TempDir(), "temporal.db"), freePort(t))
	spec, _ := restartSpec()
	e := newEnvOnServer(t, srv, spec, restartFiles)
	w1 := e.worker("w1", "--unreachable", "3s")
	code, run, out := e.submit("2024-01-01", false, "--heartbeat", "3s")
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	e.waitFile("charging")
	up := down(srv)
	// The SDK cancels the visit when its heartbeats do not get through for
	// the heartbeat timeout, or the worker stops it past its grace.
	for deadline := time.Now().Add(time.Minute); !strings.Contains(w1.Output(), "charge: stopped"); {
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not stop its visit:\n%s", w1.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	up()
	r := e.until(run)
	// The state's run ends just before its workflow does, and a query of a
	// workflow waits for its workflow task in flight: after a restart that
	// task may wait out Temporal's timeouts (a sticky queue's 5 s, a
	// workflow task's 10 s) before it completes the workflow.
	ended := time.Now()
	wait, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wid := e.wid("restart", "2024-01-01")
	if err := e.c.GetWorkflow(wait, wid, "").Get(wait, nil); wait.Err() != nil {
		t.Fatalf("workflow %s did not end: %v", wid, err)
	}
	t.Logf("the workflow ended %s after the run's state", time.Since(ended).Round(10*time.Millisecond))
	if n := e.lines("ledger", "charge "); n != 1 {
		t.Fatalf("the charge was made %d times", n)
	}
	as := e.attempts(run, "charge")
	t.Logf("run %s: %s; the charge's attempts: %+v", run, r.State, as)
	if r.State != store.RunFailed {
		t.Fatalf("run %s: %s, want failed (the charge's effect is unknown)", run, r.State)
	}
	ts := taskOf(e.status("restart", "2024-01-01"), "charge")
	if ts.State != queue.WorkFailed || !strings.Contains(ts.Reason, "pipec resolve "+run+" charge") {
		t.Fatalf("charge: %+v, want failed naming pipec resolve", ts)
	}
}
