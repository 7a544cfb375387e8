package worker_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// failingSpec is the seed's task that always ends in a run error, with
// per_worker = 2, the pipeline's retries (max_attempts) and global given.
func failingSpec(maxAttempts, global int) string {
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
  retry "pipeline" {
    # pipec:ignore unbounded-retry the worked case "retries unlimited" on purpose
    max_attempts = %d
    initial      = "10ms"
    max_delay    = "20ms"
    on           = ["run_error"]
  }
  task "extract" {
    command = ["./fail.sh"]
    retry   = "pipeline"
    timeout = "1m"
    # pipec:ignore unbounded-retry,failover-limits the worked cases on purpose
    failover {
      per_worker = 2
      global     = %d
    }
  }
}
`, maxAttempts, global)
}

var failFiles = map[string]string{"fail.sh": "#!/bin/sh\necho \"run error on $PIPEC_WORKER\" >&2\nexit 1\n"}

// alternating checks that starts go back and forth between two workers.
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

// The worked cases of docs/design.md section 6 with real workers w1, w2
// (whichever starts first): global = 3 stops after w1 w2 w1 w2, global = 2
// after w1 w2 w1.
func TestWorkedCasesStopped(t *testing.T) { onBoth(t, testWorkedCasesStopped) }

func testWorkedCasesStopped(t *testing.T, b backend) {
	for _, c := range []struct{ global, starts int }{{3, 4}, {2, 3}} {
		t.Run(fmt.Sprintf("global%d", c.global), func(t *testing.T) {
			e := newEnvOn(t, b, failingSpec(1, c.global), failFiles)
			e.worker("w1")
			e.worker("w2")
			code, out := e.pipec("submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "20ms")
			if code != 1 || !strings.Contains(out, "run seed/2024-01-01/r1 failed") {
				t.Fatalf("submit --wait: exit %d, want 1\n%s", code, out)
			}
			alternating(t, e.starts("seed/2024-01-01/r1", "extract"), c.starts)
			rs := e.until("seed/2024-01-01/r1", "the end", finished)
			want := fmt.Sprintf("another failover would exceed global = %d", c.global)
			if ts := rs.Tasks[0]; ts.State != queue.WorkFailed || !strings.Contains(ts.Reason, want) || ts.Failover.Failovers != c.global {
				t.Fatalf("task = %+v, want failed with %q after %d failovers", ts, want, c.global)
			}
		})
	}
}

// global = 4: w1 w2 w1 w2, then the run waits for a worker (global count 3
// of 4), visibly; a third worker joins and takes it once, then it stops.
func TestWorkedCaseWaitingThenJoined(t *testing.T) { onBoth(t, testWorkedCaseWaitingThenJoined) }

func testWorkedCaseWaitingThenJoined(t *testing.T, b backend) {
	e := newEnvOn(t, b, failingSpec(1, 4), failFiles)
	e.worker("w1")
	e.worker("w2")
	run := e.submit("2024-01-01")
	rs := e.until(run, "waiting for a worker", func(rs queue.RunStatus) bool { return rs.Waiting != "" })
	if want := "task extract: waiting for a worker: global count 3 of 4"; rs.Waiting != want {
		t.Fatalf("waiting = %q, want %q", rs.Waiting, want)
	}
	if rs.Run.State != store.RunRunning {
		t.Fatalf("a waiting run is %s, want running", rs.Run.State)
	}
	alternating(t, e.starts(run, "extract"), 4)
	code, out := e.pipec("workers", "--state", e.url)
	if code != 0 || !strings.Contains(out, "failover "+run+" extract: 2 of 2") {
		t.Fatalf("pipec workers does not show the exhausted counts: exit %d\n%s", code, out)
	}

	e.worker("w3")
	rs = e.until(run, "the end", finished)
	starts := e.starts(run, "extract")
	if len(starts) != 5 || starts[4] != "w3" || rs.Run.State != store.RunFailed {
		t.Fatalf("after w3 joined: starts %v, run %s; want a fifth start on w3, then failed", starts, rs.Run.State)
	}
	if rs.Waiting != "" {
		t.Fatalf("a finished run still waits: %q", rs.Waiting)
	}
}

// Pipeline retries unlimited: the task retries on its first worker forever
// and never fails over.
func TestWorkedCaseRetriesForever(t *testing.T) { onBoth(t, testWorkedCaseRetriesForever) }

func testWorkedCaseRetriesForever(t *testing.T, b backend) {
	e := newEnvOn(t, b, failingSpec(0, 3), failFiles)
	w1 := e.worker("w1")
	run := e.submit("2024-01-01")
	e.until(run, "a claim", func(rs queue.RunStatus) bool { return rs.Tasks[0].State == queue.WorkClaimed })
	e.worker("w2")
	// Wait for several attempts, all by w1.
	e.until(run, "five attempts", func(queue.RunStatus) bool {
		as, err := e.st.Attempts(t.Context(), run)
		if err != nil {
			t.Fatal(err)
		}
		return len(as) >= 5
	})
	as, _ := e.st.Attempts(t.Context(), run)
	for _, a := range as {
		if a.Worker != "w1" {
			t.Fatalf("attempt %d ran on %s: a task retried forever failed over", a.Number, a.Worker)
		}
	}
	if s := e.starts(run, "extract"); len(s) != 1 {
		t.Fatalf("starts %v: want one visit, on w1, forever", s)
	}
	w1.Signal(t, syscall.SIGTERM)
}
