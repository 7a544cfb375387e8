package worker_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// On PostgreSQL, pipec submit --wait sees the run's end as it commits, not
// at its next look: with a look an hour apart, it still returns as the run
// ends (the deadline only bounds a broken test).
func TestSubmitWaitSeesTheEndAtOnce(t *testing.T) {
	e := newEnvOn(t, onPostgres, `
pipeline "follow" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "nap" {
    command = ["sleep", "1"]
  }
}
`, nil)
	w := e.worker("w1")
	defer w.signal(t, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, pipecBin, "submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "1h")
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "PIPEC_STATE=")
	out, err := cmd.CombinedOutput()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("submit --wait --poll 1h did not return as the run ended:\n%s", out)
	}
	if err != nil || !strings.Contains(string(out), "run follow/2024-01-01/r1 succeeded") {
		t.Fatalf("submit --wait: %v\n%s", err, out)
	}
}
