package runtime

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/pipec/pipec/runtime/store"
)

// TestEveryAttemptRecordsItsProcess: whether a process ends before its pid
// is recorded on its own (then the write of its end records it, see
// markDelay) or runs longer, and whether it succeeds or fails, the store ends
// with the same account: the process (its pid, group, host and boot; its
// start time when it outlived markDelay, the one case a rerun may need it
// in), and the events started, running, finished in that order.
func TestEveryAttemptRecordsItsProcess(t *testing.T) {
	f := newFixture(t, `pipeline "marks" {
  task "quick" {
    command = ["true"]
  }
  task "fails" {
    command = ["sh", "-c", "exit 3"]
  }
  task "slow" {
    command = ["sleep", "0.3"]
  }
}`, nil)
	sum := f.run(f.options("2024-01-01"))
	ctx := context.Background()
	as, err := f.st.Attempts(ctx, sum.RunID)
	if err != nil || len(as) != 3 {
		t.Fatalf("attempts = %+v, %v", as, err)
	}
	evs, err := f.st.Events(ctx, sum.RunID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.AttemptState{"quick": store.AttemptSucceeded, "fails": store.AttemptFailed, "slow": store.AttemptSucceeded}
	for _, a := range as {
		p := a.Process()
		if a.State != want[a.Task] || p.PID <= 0 || p.PGID != p.PID || (a.Task == "slow" && p.Start == 0) || p.Host == "" || p.Boot == "" ||
			a.Started.IsZero() || a.Ended.Before(a.Started) {
			t.Errorf("%s: %+v (process %+v)", a.Task, a, p)
		}
		var kinds []string
		for _, e := range evs {
			if e.Task == a.Task && e.Attempt == a.Number && strings.HasPrefix(e.Kind, "attempt.") {
				kinds = append(kinds, e.Kind)
			}
		}
		if !slices.Equal(kinds, []string{store.EventAttemptStarted, store.EventAttemptRunning, store.EventAttemptFinished}) {
			t.Errorf("%s: events %v", a.Task, kinds)
		}
	}
}
