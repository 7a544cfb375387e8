package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/artifacts"
	"github.com/pipec/pipec/runtime/store"
)

// newScenarioFixture is a fixture of one of internal/scenario's
// pipelines and its files, written as they are.
func newScenarioFixture(t *testing.T, spec string, files map[string]string) *fixture {
	f := newFixture(t, spec, nil)
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(f.dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// newDeltaFixture is scenario.Delta in a fixture.
func newDeltaFixture(t *testing.T) *fixture {
	return newScenarioFixture(t, scenario.Delta, scenario.DeltaFiles())
}

// respec makes spec the fixture's pipeline, as an author's edit does.
func (f *fixture) respec(spec string) {
	f.t.Helper()
	path := filepath.Join(f.dir, "pipeline.hcl")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		f.t.Fatal(err)
	}
	f.plan = compilePlan(f.t, path)
}

func (f *fixture) source(day, n string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, "source-"+day), []byte(n+"\n"), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// delta is the accepted delta of the day, as its CSV's data row.
func (f *fixture) delta(day string) string {
	f.t.Helper()
	v, err := f.st.AcceptedVersion(context.Background(), f.plan.Pipeline, "delta", day)
	if err != nil {
		f.t.Fatal(err)
	}
	arts, err := artifacts.NewFolder(filepath.Join(filepath.Dir(f.state), "versions"))
	if err != nil {
		f.t.Fatal(err)
	}
	dir, err := artifacts.Files(context.Background(), arts, v.Location)
	if err != nil {
		f.t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "delta.csv"))
	if err != nil {
		f.t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

func (f *fixture) mustSucceed(o Options) *Summary {
	f.t.Helper()
	sum := f.run(o)
	if sum.Failed {
		f.t.Fatalf("run of %s failed:\n%s", o.Interval, sum.text())
	}
	return sum
}

// A day's source is corrected and the day rebuilt (--force): the next day's
// task that read the day's raw (raw@-1) is not reused from before, since
// what it read is no longer the accepted version, and the next run reuses
// it again. On the build before, the rerun reused it and the day's delta
// kept the old figure for good.
func TestRebuiltIntervalRunsItsReaders(t *testing.T) {
	f := newDeltaFixture(t)
	f.mustSucceed(f.options("2024-01-01"))
	f.mustSucceed(f.options("2024-01-02"))
	if got := f.delta("2024-01-02"); got != "10,20" {
		t.Fatalf("delta of day 2 = %q, want 10,20", got)
	}

	f.source("2024-01-01", "15")
	forced := f.options("2024-01-01")
	forced.Force = true
	f.mustSucceed(forced)

	again := f.mustSucceed(f.options("2024-01-02"))
	if s := again.task("extract").State; s != TaskReused {
		t.Errorf("extract of day 2 = %s, want reused (nothing it read moved)", s)
	}
	if s := again.task("delta").State; s != TaskSucceeded {
		t.Errorf("delta of day 2 = %s, want run again (raw of day 1 was rebuilt)\n%s", s, again.text())
	}
	if got := f.delta("2024-01-02"); got != "15,20" {
		t.Errorf("delta of day 2 = %q after the rerun, want 15,20", got)
	}
	v, err := f.st.AcceptedVersion(context.Background(), f.plan.Pipeline, "delta", "2024-01-02")
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.st.GetAttempt(context.Background(), store.AttemptRef{Run: v.Run, Task: v.Task, Number: v.Attempt})
	if err != nil {
		t.Fatal(err)
	}
	raw1, err := f.st.AcceptedVersion(context.Background(), f.plan.Pipeline, "raw", "2024-01-01")
	if err != nil {
		t.Fatal(err)
	}
	want := store.Read{Artifact: "raw", Interval: "2024-01-01", Version: raw1.ID, Digest: raw1.Digest}
	if len(a.Reads) != 1 || a.Reads[0] != want {
		t.Errorf("delta's attempt read %+v, want [%+v]", a.Reads, want)
	}

	third := f.mustSucceed(f.options("2024-01-02"))
	if s := third.task("delta").State; s != TaskReused {
		t.Errorf("delta of day 2 = %s on the third run, want reused\n%s", s, third.text())
	}
}

// A rebuild that gave the day the same content (a new version, an equal
// digest) changes nothing the next day read: its delta is reused.
func TestRebuiltAlikeKeepsItsReaders(t *testing.T) {
	f := newDeltaFixture(t)
	f.mustSucceed(f.options("2024-01-01"))
	f.mustSucceed(f.options("2024-01-02"))
	forced := f.options("2024-01-01")
	forced.Force = true
	f.mustSucceed(forced)
	again := f.mustSucceed(f.options("2024-01-02"))
	if s := again.task("delta").State; s != TaskReused {
		t.Errorf("delta of day 2 = %s, want reused (day 1's content is the same)\n%s", s, again.text())
	}
}

// A day read as nothing (before the schedule's start) and built later,
// once the start moved back, makes the result that read nothing out of
// date: the next run of the day after runs its delta again.
func TestStartMovedBackRunsWhatReadNothing(t *testing.T) {
	f := newDeltaFixture(t)
	f.mustSucceed(f.options("2024-01-01"))
	if got := f.delta("2024-01-01"); got != "0,10" {
		t.Fatalf("delta of the first day = %q, want 0,10", got)
	}
	f.respec(strings.Replace(scenario.Delta, `start = "2024-01-01T00:00:00Z"`, `start = "2023-12-31T00:00:00Z"`, 1))
	f.source("2023-12-31", "5")
	f.mustSucceed(f.options("2023-12-31"))
	again := f.mustSucceed(f.options("2024-01-01"))
	if s := again.task("delta").State; s != TaskSucceeded {
		t.Errorf("delta of 2024-01-01 = %s, want run again (the day before exists now)\n%s", s, again.text())
	}
	if got := f.delta("2024-01-01"); got != "5,10" {
		t.Errorf("delta of 2024-01-01 = %q, want 5,10", got)
	}
}
