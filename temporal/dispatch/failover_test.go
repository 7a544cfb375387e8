package dispatch_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// The seed's failover on real workers through Temporal: the workflow steps
// pipec's failover model (runtime/queue's decisions) and routes each
// failover's start to the worker it picked, through that worker's own task
// queue.

// failingSpec is the seed's task that always ends in a run error, with
// per_worker = 2 and global given.
func failingSpec(global int) string {
	return fmt.Sprintf(`
pipeline "seed" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  error "run_error" {
    exit_codes = [1]
  }
  task "extract" {
    command = ["./fail.sh"]
    timeout = "1m"
    # pipec:ignore failover-limits the worked cases on purpose
    failover {
      per_worker = 2
      global     = %d
    }
  }
}
`, global)
}

var failFiles = map[string]string{"fail.sh": "#!/bin/sh\necho \"run error on $PIPEC_WORKER\" >&2\nexit 1\n"}

// starts are the workers of the task's attempts, in order (one attempt
// per visit here).
func (e *env) starts(run, task string) []string {
	var out []string
	for _, a := range e.attempts(run, task) {
		out = append(out, a.Worker)
	}
	return out
}

func alternating(t *testing.T, starts []string, n int) {
	t.Helper()
	if len(starts) != n {
		t.Fatalf("%d starts %v, want %d", len(starts), starts, n)
	}
	for i := 1; i < len(starts); i++ {
		if starts[i] == starts[i-1] {
			t.Fatalf("starts %v do not alternate between the two workers", starts)
		}
	}
}

// global = 3 stops after w1 w2 w1 w2, global = 2 after w1 w2 w1 (whichever
// starts first).
func TestWorkedCasesStopped(t *testing.T) {
	for _, c := range []struct{ global, starts int }{{3, 4}, {2, 3}} {
		t.Run(fmt.Sprintf("global%d", c.global), func(t *testing.T) {
			e := newEnv(t, failingSpec(c.global), failFiles)
			e.worker("w1")
			e.worker("w2")
			code, run, out := e.submit("2024-01-01", true)
			if code != 1 || !strings.Contains(out, "run seed/2024-01-01/r1 failed") {
				t.Fatalf("submit --wait: exit %d, want 1\n%s", code, out)
			}
			alternating(t, e.starts(run, "extract"), c.starts)
			ts := taskOf(e.status("seed", "2024-01-01"), "extract")
			want := fmt.Sprintf("another failover would exceed global = %d", c.global)
			if ts.State != queue.WorkFailed || !strings.Contains(ts.Reason, want) || ts.Failover.Failovers != c.global {
				t.Fatalf("task = %+v, want failed with %q after %d failovers", ts, want, c.global)
			}
		})
	}
}

// global = 4: w1 w2 w1 w2, then the run waits for a worker (global count 3
// of 4), visibly; a third worker joins and takes it once, then it stops.
func TestWorkedCaseWaitingThenJoined(t *testing.T) {
	e := newEnv(t, failingSpec(4), failFiles)
	e.worker("w1")
	e.worker("w2")
	_, run, _ := e.submit("2024-01-01", false)
	var waiting string
	for deadline := time.Now().Add(2 * time.Minute); waiting == ""; time.Sleep(100 * time.Millisecond) {
		waiting = e.status("seed", "2024-01-01").Waiting
		if time.Now().After(deadline) {
			t.Fatalf("the run never waited for a worker")
		}
	}
	if want := "task extract: waiting for a worker: global count 3 of 4"; waiting != want {
		t.Fatalf("waiting = %q, want %q", waiting, want)
	}
	if r, _ := e.st.GetRun(t.Context(), run); r.State != store.RunRunning {
		t.Fatalf("a waiting run is %s, want running", r.State)
	}
	alternating(t, e.starts(run, "extract"), 4)
	evs, err := e.st.Events(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	said := 0
	for _, ev := range evs {
		if ev.Kind == queue.EventRunWaiting && strings.Contains(string(ev.Payload), "global count 3 of 4") {
			said++
		}
	}
	if said != 1 {
		t.Fatalf("%d run.waiting events saying global count 3 of 4, want 1", said)
	}
	e.worker("w3")
	if r := e.until(run); r.State != store.RunFailed {
		t.Fatalf("run %s, want failed", r.State)
	}
	starts := e.starts(run, "extract")
	if len(starts) != 5 || starts[4] != "w3" {
		t.Fatalf("after w3 joined: starts %v; want a fifth start on w3", starts)
	}
	if s := e.status("seed", "2024-01-01"); s.Waiting != "" {
		t.Fatalf("a finished run still waits: %q", s.Waiting)
	}
	e.replay("seed", "2024-01-01", "failover-waiting-joined")
}

// A worker stopped gracefully (SIGTERM) mid-task hands the task back, and
// that counts nowhere: with global = 0 (no counted failover allowed) the
// task still moves to the other worker and succeeds there.
func TestSIGTERMNotCounted(t *testing.T) {
	spec := `
pipeline "hold" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "load" {
    command = ["./hold.sh"]
    outputs = ["out"]
    # pipec:ignore failover-limits no counted failover on purpose
    failover {
      per_worker = 1
      global     = 0
    }
  }
}
`
	e := newEnv(t, spec, map[string]string{"hold.sh": `#!/bin/sh
if [ "$PIPEC_WORKER" = w1 ]; then
  echo $$ > started-w1
  while [ -f hold.sh ]; do sleep 0.05; done
fi
printf 'id,worker\n1,%s\n' "$PIPEC_WORKER" > "$PIPEC_OUTPUT_out/data.csv"
`})
	w1 := e.worker("w1")
	_, run, _ := e.submit("2024-01-01", false)
	e.waitFile("started-w1")
	e.worker("w2")
	interrupt(t, w1)
	if !strings.Contains(w1.Output(), "handed back") {
		t.Fatalf("w1 did not hand the task back:\n%s", w1.Output())
	}
	if r := e.until(run); r.State != store.RunSucceeded {
		t.Fatalf("run %s, want succeeded: %+v", r.State, e.status("hold", "2024-01-01"))
	}
	ts := taskOf(e.status("hold", "2024-01-01"), "load")
	if ts.Failover.Failovers != 0 || ts.Failover.Visits["w1"] != 0 || ts.Failover.Visits["w2"] != 1 {
		t.Fatalf("failover state %+v: the shutdown was counted", ts.Failover)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "started-w1")); err != nil {
		t.Fatal(err)
	}
}
