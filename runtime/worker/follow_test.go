package worker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pipec submit --wait sees the run's end as it commits, not at its next
// look: with a look an hour apart, it still returns as the run ends (the
// deadline only bounds a broken test).
func TestSubmitWaitSeesTheEndAtOnce(t *testing.T) {
	onBoth(t, func(t *testing.T, b backend) {
		e := napEnv(t, b, "1")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := e.submitWait(ctx, "2024-01-01", "1h")
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("submit --wait --poll 1h did not return as the run ended:\n%s", out)
		}
		if err != nil || !strings.Contains(string(out), "run follow/2024-01-01/r1 succeeded") {
			t.Fatalf("submit --wait: %v\n%s", err, out)
		}
	})
}

// So does pipec backfill --submit --wait, for each of its runs: it hands
// the next interval over as a run ends, not at its next look (one listener
// for the whole backfill), and returns as the last one ends.
func TestBackfillSubmitSeesEachEndAtOnce(t *testing.T) {
	onBoth(t, func(t *testing.T, b backend) {
		e := napEnv(t, b, "0.3")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := e.pipecUntil(ctx, "backfill", "pipeline.hcl", "--from", "2024-01-01", "--to", "2024-01-03",
			"--submit", "--wait", "--state", e.url, "--poll", "1h")
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("backfill --submit --wait --poll 1h did not go on as each run ended:\n%s", out)
		}
		if err != nil || !strings.Contains(string(out), "3 of 3 run(s) succeeded") {
			t.Fatalf("backfill --submit --wait: %v\n%s", err, out)
		}
	})
}

// napEnv is the pipeline "follow", of one task sleeping nap seconds, on b
// with one worker.
func napEnv(t *testing.T, b backend, nap string) *env {
	t.Helper()
	e := newEnvOn(t, b, fmt.Sprintf(`
pipeline "follow" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "nap" {
    command = ["sleep", %q]
  }
}
`, nap), nil)
	w := e.worker("w1")
	t.Cleanup(func() { w.Signal(t, syscall.SIGTERM) })
	return e
}

// An idle worker is woken when work is submitted, not at its next look: a
// worker that looks only every minute (--lease 5m) still starts a run's
// task at once, then, idle again once that run is over, the next run's.
// It listens for wakeups only while it has nothing to do, so this is its
// listening begun, ended by a claim, and begun again. The deadline is far
// below the minute and only bounds a broken test.
func TestAnIdleWorkerIsWokenAtOnce(t *testing.T) {
	onBoth(t, testAnIdleWorkerIsWokenAtOnce)
}

func testAnIdleWorkerIsWokenAtOnce(t *testing.T, b backend) {
	e := newEnvOn(t, b, `
pipeline "wake" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "first" {
    command = ["true"]
  }
  task "then" {
    command = ["sleep", "0.2"]
    depends_on = ["first"]
  }
}
`, nil)
	w := e.worker("w1", "--lease", "5m")
	defer w.Signal(t, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, interval := range []string{"2024-01-01", "2024-01-02"} {
		out, err := e.submitWait(ctx, interval, "50ms")
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("the run of %s did not end within 30s of its submit (the worker looks every minute):\n%s\nworker:\n%s", interval, out, w.Output())
		}
		if err != nil || !strings.Contains(string(out), "run wake/"+interval+"/r1 succeeded") {
			t.Fatalf("submit --wait of %s: %v\n%s", interval, err, out)
		}
	}
}

// submitWait runs pipec submit --wait of the env's spec for interval,
// looking every poll, until it returns or ctx ends.
func (e *env) submitWait(ctx context.Context, interval, poll string) ([]byte, error) {
	return e.pipecUntil(ctx, "submit", "pipeline.hcl", "--interval", interval, "--state", e.url, "--wait", "--poll", poll)
}

// pipecUntil runs pipec with args in the env's folder until it returns or
// ctx ends, and returns its output.
func (e *env) pipecUntil(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, pipecBin, args...)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "PIPEC_STATE=")
	return cmd.CombinedOutput()
}
