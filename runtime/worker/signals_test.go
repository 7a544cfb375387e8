package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// holdSpec is one task that, on w1, waits until the file "release" exists
// (recording its pid and that it started), and elsewhere succeeds at once;
// it writes an output published to a fenced sink.
func holdSpec(failover string) string {
	return `
pipeline "hold" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "load" {
    command = ["./hold.sh"]
    outputs = ["out"]
    timeout = "5m"
` + failover + `
  }
  check "out_ok" {
    input         = "out"
    row_count_min = 1
  }
  sink "wh" {
    type    = "directory"
    path    = "warehouse"
    fencing = "token"
  }
  publish "mart" {
    artifact = "out"
    sink     = "wh"
  }
}
`
}

var holdFiles = map[string]string{"hold.sh": `#!/bin/sh
if [ "$PIPEC_WORKER" = w1 ] && [ ! -f release ]; then
  echo $$ > w1.pid
  touch started-w1
  while [ ! -f release ] && [ -f hold.sh ]; do sleep 0.05; done
fi
printf 'id,worker\n1,%s\n' "$PIPEC_WORKER" > "$PIPEC_OUTPUT_out/data.csv"
[ "$PIPEC_WORKER" = w1 ] && touch ended-w1
exit 0
`}

// waitFile waits until the file exists in the test's folder.
func (e *env) waitFile(name string) {
	e.t.Helper()
	e.until(e.anyRun(), "file "+name, func(queue.RunStatus) bool {
		_, err := os.Stat(filepath.Join(e.dir, name))
		return err == nil
	})
}

// anyRun is the first run of the state (tests submit one at a time).
func (e *env) anyRun() string {
	e.t.Helper()
	runs, err := e.st.ListRuns(context.Background(), store.RunFilter{})
	if err != nil || len(runs) == 0 {
		e.t.Fatalf("no run: %v", err)
	}
	return runs[0].ID
}

// killTask kills the w1 task process left behind by a killed worker.
func (e *env) killTask() {
	b, err := os.ReadFile(filepath.Join(e.dir, "w1.pid"))
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
		killIfOurs(pid, e.dir)
	}
}

// killIfOurs kills the process group of pid, and pid, if pid is still a
// process started in dir: a task that ended long ago left its pid to be
// reused (pid_max may be 32768), and a SIGKILL by number alone would hit
// whatever process of another test has it now.
func killIfOurs(pid int, dir string) {
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil || !strings.HasPrefix(cwd, dir) {
		return
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	syscall.Kill(pid, syscall.SIGKILL)
}

func (e *env) published() string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, "warehouse", "2024-01-01", "data.csv"))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// A graceful SIGTERM hands the running task back without counting: with
// global = 0 (no failover allowed at all) the task still moves to w2 and
// succeeds, and its counts show no visit of w1 and no failover.
func TestSIGTERMNotCounted(t *testing.T) { onBoth(t, testSIGTERMNotCounted) }

func testSIGTERMNotCounted(t *testing.T, b backend) {
	e := newEnvOn(t, b, holdSpec("    failover {\n      per_worker = 1\n      global     = 0\n    }"), holdFiles)
	w1 := e.worker("w1")
	run := e.submit("2024-01-01")
	e.waitFile("started-w1")
	e.worker("w2")
	w1.Signal(t, syscall.SIGTERM)
	// A graceful stop on a signal: pipec's interrupt exit code.
	if ee, ok := w1.Err.(*exec.ExitError); !ok || ee.ExitCode() != 130 || !strings.Contains(w1.Output(), "worker w1 stopped") {
		t.Fatalf("w1 exited with %v after SIGTERM, want 130 after a clean stop\n%s", w1.Err, w1.Output())
	}
	if !strings.Contains(w1.Output(), "handed back") {
		t.Errorf("w1 does not say it handed the task back:\n%s", w1.Output())
	}
	rs := e.until(run, "the end", finished)
	ts := rs.Tasks[0]
	if rs.Run.State != store.RunSucceeded || ts.Failover.Failovers != 0 || ts.Failover.Visits["w1"] != 0 || ts.Failover.Visits["w2"] != 1 {
		t.Fatalf("run %s, task %+v: want succeeded on w2 with nothing counted", rs.Run.State, ts)
	}
	if got := e.published(); got != "id,worker\n1,w2\n" {
		t.Fatalf("published %q", got)
	}
	code, out := e.pipec("workers", "--state", e.url)
	if code != 0 || !strings.Contains(out, "w1  host") || !strings.Contains(out, "stopped") {
		t.Fatalf("pipec workers after w1 stopped: exit %d\n%s", code, out)
	}
}

// SIGKILL of a worker mid-task: its claim's lease runs out, w2 relaunches
// the task (a counted failover) with a higher token and the run succeeds.
func TestSIGKILLMidTask(t *testing.T) { onBoth(t, testSIGKILLMidTask) }

func testSIGKILLMidTask(t *testing.T, b backend) {
	e := newEnvOn(t, b, holdSpec("    failover {\n      per_worker = 1\n      global     = 1\n    }"), holdFiles)
	t.Cleanup(e.killTask)
	w1 := e.worker("w1")
	run := e.submit("2024-01-01")
	e.waitFile("started-w1")
	e.worker("w2")
	w1.Signal(t, syscall.SIGKILL)
	rs := e.until(run, "the end", finished)
	if rs.Run.State != store.RunSucceeded {
		t.Fatalf("run %s: %+v", rs.Run.State, rs.Tasks)
	}
	if s := e.starts(run, "load"); len(s) != 2 || s[0] != "w1" || s[1] != "w2" {
		t.Fatalf("starts %v, want w1 then w2", s)
	}
	if f := rs.Tasks[0].Failover.Failovers; f != 1 {
		t.Fatalf("failovers = %d, want 1 (a lost worker counts)", f)
	}
	as, err := e.st.Attempts(t.Context(), run)
	if err != nil || len(as) != 2 || as[1].Token <= as[0].Token || as[1].Worker != "w2" {
		t.Fatalf("attempts %+v, %v: want w2's relaunch with a higher token", as, err)
	}
	if got := e.published(); got != "id,worker\n1,w2\n" {
		t.Fatalf("published %q", got)
	}
}

// Gray failure: w1 is SIGSTOPped mid-task; its claim expires and w2
// relaunches the task with a higher token and publishes. The w1 task
// process ends while w1 is stopped; on SIGCONT w1 learns its claim is gone,
// its late publish (if it gets that far) is fenced, the visible data stays
// w2's, and w1 goes on claiming new work.
//
// On PostgreSQL only: a worker stopped inside a write transaction of an
// SQLite file holds the file's write lock until it resumes, and SQLite
// cannot take it away (docs/workers.md), so on SQLite this test would hang
// whenever SIGSTOP lands in one of w1's heartbeats.
func TestSIGSTOPGrayFailure(t *testing.T) {
	e := newEnv(t, holdSpec(""), holdFiles)
	t.Cleanup(e.killTask)
	w1 := e.elsewhere("w1") // its task outlives its claim, as on another machine
	run := e.submit("2024-01-01")
	e.waitFile("started-w1")
	w1.Signal(t, syscall.SIGSTOP)
	w2 := e.worker("w2")
	rs := e.until(run, "w2 to finish the run", finished)
	if rs.Run.State != store.RunSucceeded {
		t.Fatalf("run %s: %+v", rs.Run.State, rs.Tasks)
	}
	// Let w1's task end while w1 is stopped, then wake w1.
	if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.waitFile("ended-w1")
	w1.Signal(t, syscall.SIGCONT)
	e.until(run, "w1 to notice", func(queue.RunStatus) bool {
		return strings.Contains(w1.Output(), "this worker's lease on it expired") || strings.Contains(w1.Output(), "not this worker's to report")
	})

	as, err := e.st.Attempts(t.Context(), run)
	if err != nil || len(as) != 2 {
		t.Fatalf("attempts %+v, %v", as, err)
	}
	late, relaunch := as[0], as[1]
	if late.Worker != "w1" || relaunch.Worker != "w2" || relaunch.Token <= late.Token {
		t.Fatalf("attempts %+v: want w1's, then w2's with a higher token", as)
	}
	p, err := e.st.Pointer(t.Context(), "hold", "wh", "out", "2024-01-01")
	if err != nil || p.Token != relaunch.Token {
		t.Fatalf("pointer %+v, %v: want w2's token %d", p, err, relaunch.Token)
	}
	if got := e.published(); got != "id,worker\n1,w2\n" {
		t.Fatalf("published %q: the late attempt's data is visible", got)
	}
	evs, err := e.st.Events(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Attempt == late.Number && ev.Kind == store.EventPublishWon {
			t.Fatalf("the late attempt won a publish: %s", ev.Payload)
		}
		if ev.Attempt == late.Number && ev.Kind == store.EventPublishFenced {
			var pl map[string]any
			_ = json.Unmarshal(ev.Payload, &pl)
			t.Logf("late publish fenced: %v", pl)
		}
	}

	// w1 goes on claiming: the next interval, with w2 gone, runs on w1.
	w2.Signal(t, syscall.SIGTERM)
	next := e.submit("2024-01-02")
	rs = e.until(next, "the next run", finished)
	if rs.Run.State != store.RunSucceeded || rs.Tasks[0].Worker != "w1" {
		t.Fatalf("next run %s on %q, want succeeded on w1", rs.Run.State, rs.Tasks[0].Worker)
	}
}

// A worker resumed after its claim was taken over says so once, however
// long its task takes to stop (here it ignores SIGTERM, so it lives out the
// kill grace over many heartbeats), and a worker whose claims were never
// taken over never says it, not even for a task whose finish commits while
// a heartbeat is under way.
func TestTakenOverSaidOnce(t *testing.T) {
	e := newEnv(t, holdSpec(""), map[string]string{"hold.sh": `#!/bin/sh
if [ "$PIPEC_WORKER" = w1 ]; then
  trap '' TERM
  echo $$ > w1.pid
  touch started-w1
  while :; do sleep 0.05; done
fi
printf 'id,worker\n1,%s\n' "$PIPEC_WORKER" > "$PIPEC_OUTPUT_out/data.csv"
`})
	t.Cleanup(e.killTask)
	w1 := e.elsewhere("w1") // its task outlives its claim, as on another machine
	run := e.submit("2024-01-01")
	e.waitFile("started-w1")
	w1.Signal(t, syscall.SIGSTOP)
	w2 := e.worker("w2")
	if rs := e.until(run, "w2 to finish the run", finished); rs.Run.State != store.RunSucceeded {
		t.Fatalf("run %s: %+v", rs.Run.State, rs.Tasks)
	}
	// More quick runs on w2 alone: each finish may commit during a beat.
	for _, iv := range []string{"2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"} {
		e.until(e.submit(iv), "run "+iv, finished)
	}
	w1.Signal(t, syscall.SIGCONT)
	e.until(run, "w1 to give the task up", func(queue.RunStatus) bool {
		return strings.Contains(w1.Output(), "this worker's lease on it expired")
	})
	const lost = "lost its claim here"
	if n := strings.Count(w1.Output(), lost); n != 1 {
		t.Errorf("w1 said %q %d times, want once:\n%s", lost, n, w1.Output())
	}
	if strings.Contains(w2.Output(), lost) {
		t.Errorf("w2 lost no claim, yet said %q:\n%s", lost, w2.Output())
	}
}

// elsewhere starts a worker whose attempts are recorded as another
// machine's (PIPEC_TEST_HOST, in the test-hook build): a worker on this
// machine then cannot end its task's process, as it could not on a real
// second machine, and must rely on fencing alone.
func (e *env) elsewhere(name string) *proc {
	e.t.Helper()
	p := e.workerWith(hookPipec(e.t.(*testing.T)), []string{"PIPEC_TEST_HOST=elsewhere.test"}, name)
	if !strings.Contains(p.Output(), "worker "+name+" registered") {
		e.t.Fatalf("worker %s did not register:\n%s", name, p.Output())
	}
	return p
}
