package worker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/store"
)

// A day rebuilt on workers with corrected data (submit --force) leaves the
// next day's delta, which read it (raw@-1), out of date: the next day's
// resubmission runs delta again instead of reusing it, and publishes the
// corrected figure; what read nothing that moved (extract) is reused.
func TestRebuiltIntervalRunsItsReadersOnWorkers(t *testing.T) {
	onBoth(t, testRebuiltIntervalRunsItsReaders)
}

func testRebuiltIntervalRunsItsReaders(t *testing.T, b backend) {
	e := newEnvOn(t, b, scenario.Delta, scenario.DeltaFiles())
	e.worker("w1")
	submit := func(day string, extra ...string) {
		t.Helper()
		args := append([]string{"submit", "pipeline.hcl", "--interval", day, "--state", e.url, "--wait", "--poll", "20ms"}, extra...)
		if code, out := e.pipec(args...); code != 0 {
			t.Fatalf("submit %s %v: exit %d\n%s", day, extra, code, out)
		}
	}
	published := func(day string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(e.dir, "warehouse", day, "delta.csv"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	submit("2024-01-01")
	submit("2024-01-02")
	if got := published("2024-01-02"); got != "prev,cur\n10,20" {
		t.Fatalf("day 2 published %q", got)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "source-2024-01-01"), []byte("15\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	submit("2024-01-01", "--force")
	submit("2024-01-02")
	if got := published("2024-01-02"); got != "prev,cur\n15,20" {
		t.Errorf("day 2 published %q after day 1 was rebuilt, want prev,cur 15,20", got)
	}
	ran := false
	for _, a := range e.attempts("days/2024-01-02/r2", "delta") {
		ran = ran || a.State == store.AttemptSucceeded
	}
	if !ran {
		t.Errorf("delta did not run again in days/2024-01-02/r2")
	}
	if e.events("days/2024-01-02/r2", "task.reused", "extract") != 1 {
		t.Errorf("extract was not reused in days/2024-01-02/r2")
	}
}
