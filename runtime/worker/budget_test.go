package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pipec/pipec/internal/scenario"
)

// A run's retry budget is the run's, not each visit's: an outage every
// task meets, visited by two workers, takes at most the retries the budget
// allows the whole run, where each visit used to allow itself the budget's
// minimum (a retry for every task).
func TestRetryBudgetSpansTheRunsVisits(t *testing.T) {
	onBoth(t, testRetryBudgetSpansTheRunsVisits)
}

func testRetryBudgetSpansTheRunsVisits(t *testing.T, b backend) {
	e := newEnvOn(t, b, scenario.Storm(), nil)
	e.worker("w1")
	e.worker("w2")
	code, out := e.pipec("submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "20ms")
	if code != 1 {
		t.Fatalf("submit --wait: exit %d, want 1 (every task fails)\n%s", code, out)
	}
	as, err := e.st.Attempts(context.Background(), scenario.StormRun)
	if err != nil {
		t.Fatal(err)
	}
	if err := scenario.CheckStorm(as); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "the run's retry budget is spent") {
		t.Errorf("no task was stopped by the run's retry budget:\n%s", out)
	}
}
