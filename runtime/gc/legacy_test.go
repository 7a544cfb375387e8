package gc

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

// A state an older pipec wrote keeps its staging in the older layout
// (sink.LegacyStagingPath): gc decides those attempt folders as it decides
// the ones of today's layout, beside them.
func TestLegacyStagingCollected(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	root := filepath.Join(dir, "staging")
	day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	run, err := st.CreateRun(ctx, store.NewRun{Pipeline: "p", Interval: "2024-01-01", IntervalStart: day,
		IntervalEnd: day.AddDate(0, 0, 1), CodeVersion: "c", PlanDigest: "sha256:x"})
	if err != nil {
		t.Fatal(err)
	}
	// stage makes the output folder of a new attempt of task, with a file,
	// in the layout path names, and returns the attempt's folder.
	stage := func(task string, state store.AttemptState, path func(string, string, string, int, string) (string, error)) string {
		a, err := st.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: task, Resource: store.FenceResource("p", "2024-01-01")})
		if err != nil {
			t.Fatal(err)
		}
		out, err := path(root, run.ID, task, a.Number, "rows")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, "7"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if state != store.AttemptRunning {
			if err := st.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: state}); err != nil {
				t.Fatal(err)
			}
		}
		return filepath.Dir(out)
	}
	oldFailed := stage("old", store.AttemptFailed, sink.LegacyStagingPath)
	newFailed := stage("new", store.AttemptFailed, sink.StagingPath)
	oldRunning := stage("old", store.AttemptRunning, sink.LegacyStagingPath)
	newRunning := stage("new", store.AttemptRunning, sink.StagingPath)

	rep, err := Collect(ctx, Options{Store: st, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 0 {
		t.Errorf("with the run running, removed %+v", rep.Removed)
	}
	if err := st.FinishRun(ctx, run.ID, store.RunFailed); err != nil {
		t.Fatal(err)
	}
	rep, err = Collect(ctx, Options{Store: st, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range rep.Removed {
		got = append(got, it.Path)
	}
	slices.Sort(got)
	want := []string{newFailed, oldFailed}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("removed %v, want the failed attempts' folders %v", got, want)
	}
	for _, p := range []string{oldRunning, newRunning} {
		if _, err := os.Stat(filepath.Join(p, "rows", "7")); err != nil {
			t.Errorf("a running attempt's staging: %v", err)
		}
	}
}
