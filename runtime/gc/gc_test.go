package gc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/artifacts"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

// newState is a new SQLite state in a folder of its own, which it returns
// (its StateDir), closed when the test ends.
func newState(t *testing.T) (string, *sqlite.Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return dir, st
}

// TestNothingLiveIsCollected: with a run running, gc touches none of its
// staging (its running attempt writes there) and no accepted version's
// staging of a finished run either, even a superseded one (a running attempt
// may read it); once the run is over, the superseded and failed staging go
// and the current accepted version's stays.
func TestNothingLiveIsCollected(t *testing.T) {
	ctx := context.Background()
	dir, st := newState(t)
	root := filepath.Join(dir, "staging")
	day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	newRun := func() store.Run {
		r, err := st.CreateRun(ctx, store.NewRun{Pipeline: "p", Interval: "2024-01-01", IntervalStart: day,
			IntervalEnd: day.AddDate(0, 0, 1), CodeVersion: "c", PlanDigest: "sha256:x"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// produce starts an attempt of task in run, stages its output, and
	// (unless running) finishes it, accepted or not.
	produce := func(run store.Run, task, content string, state store.AttemptState, accept bool) string {
		a, err := st.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: task, Resource: store.FenceResource("p", "2024-01-01")})
		if err != nil {
			t.Fatal(err)
		}
		out, err := sink.NewStaging(root, run.ID, task, a.Number, "rows")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, "rows.csv"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if state == store.AttemptRunning {
			return filepath.Dir(out)
		}
		if err := st.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: state}); err != nil {
			t.Fatal(err)
		}
		digest, err := sink.Digest(out)
		if err != nil {
			t.Fatal(err)
		}
		v, err := st.RecordVersion(ctx, store.Version{Artifact: "rows", Interval: "2024-01-01", Digest: digest, Run: run.ID,
			Task: task, Attempt: a.Number, Location: out})
		if err != nil {
			t.Fatal(err)
		}
		if accept {
			err = st.AcceptVersion(ctx, v.ID)
		} else {
			err = st.RejectVersion(ctx, v.ID, "no")
		}
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Dir(out)
	}
	r1 := newRun()
	old := produce(r1, "make", "id\n1\n", store.AttemptSucceeded, true)
	cur := produce(r1, "make", "id\n2\n", store.AttemptSucceeded, true)
	rejected := produce(r1, "make", "id\n3\n", store.AttemptFailed, false)
	if err := st.FinishRun(ctx, r1.ID, store.RunFailed); err != nil {
		t.Fatal(err)
	}
	r2 := newRun()
	live := produce(r2, "make", "id\n4\n", store.AttemptRunning, false)

	removed := func(rep *Report) []string {
		var out []string
		for _, it := range rep.Removed {
			out = append(out, it.Path)
		}
		slices.Sort(out)
		return out
	}
	rep, err := Collect(ctx, Options{Store: st, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := removed(rep); !slices.Equal(got, []string{rejected}) {
		t.Errorf("with r2 running, removed %v; want only the rejected attempt %s", got, rejected)
	}
	if !slices.Equal(rep.Running, []string{r2.ID}) {
		t.Errorf("the report names %v as running, want [%s]", rep.Running, r2.ID)
	}
	for _, p := range []string{old, cur, live} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	// r2 ends (its attempt failed): now the superseded version goes too.
	if err := st.FinishAttempt(ctx, store.AttemptRef{Run: r2.ID, Task: "make", Number: 1}, store.Outcome{State: store.AttemptFailed}); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishRun(ctx, r2.ID, store.RunFailed); err != nil {
		t.Fatal(err)
	}
	rep, err = Collect(ctx, Options{Store: st, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Running != nil {
		t.Errorf("with no run running, the report names %v", rep.Running)
	}
	want := []string{old, live}
	slices.Sort(want)
	if got := removed(rep); !slices.Equal(got, want) {
		t.Errorf("after the runs: removed %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(cur, "rows", "rows.csv")); err != nil {
		t.Errorf("the current accepted version's staging is gone: %v", err)
	}
}

// TestLeftStagingKept: the staging of a succeeded attempt whose run was
// stopped before it audited the outputs (output.left) is what the next run
// audits (it does not run a non-idempotent task again), so gc keeps it
// once the run is over, until a later attempt of the task succeeds; and so
// it keeps the version such an attempt recorded and put into the shared
// artifact store, which a visit on another machine audits instead.
func TestLeftStagingKept(t *testing.T) {
	ctx := context.Background()
	dir, st := newState(t)
	shared, err := artifacts.NewFolder(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	collect := func() *Report {
		t.Helper()
		rep, err := Collect(ctx, Options{Store: st, StateDir: dir, Artifacts: shared})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	// stopped runs charge, which succeeds and stages its output, records
	// it and puts it into the shared store, and ends the run; with end
	// "left", the output is left as a stopped run leaves it; "rejected", a
	// check rejected it. It returns the attempt's staging folder and the
	// version's path in the store.
	stopped := func(end string) (string, string) {
		r, err := st.CreateRun(ctx, store.NewRun{Pipeline: "p", Interval: "2024-01-01", CodeVersion: "c"})
		if err != nil {
			t.Fatal(err)
		}
		a, err := st.StartAttempt(ctx, store.AttemptSpec{Run: r.ID, Task: "charge", Resource: store.FenceResource("p", "2024-01-01")})
		if err != nil {
			t.Fatal(err)
		}
		out, err := sink.NewStaging(filepath.Join(dir, "staging"), r.ID, "charge", a.Number, "receipt")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, "r.csv"), []byte(r.ID), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := st.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptSucceeded}); err != nil {
			t.Fatal(err)
		}
		frozen, digest, err := sink.Freeze(out, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		key, err := artifacts.NewKey("p", "receipt", digest)
		if err != nil {
			t.Fatal(err)
		}
		if err := shared.Put(ctx, key, frozen); err != nil {
			t.Fatal(err)
		}
		v, err := st.RecordVersion(ctx, store.Version{Artifact: "receipt", Interval: "2024-01-01", Digest: digest, Run: r.ID,
			Task: "charge", Attempt: a.Number, Location: key.String()})
		if err != nil {
			t.Fatal(err)
		}
		if end == "rejected" {
			if err := st.RejectVersion(ctx, v.ID, "check receipt_ok failed"); err != nil {
				t.Fatal(err)
			}
		}
		if end == "left" {
			if _, err := st.AppendEvent(ctx, store.Event{Run: r.ID, Kind: store.EventOutputLeft, Task: "charge", Attempt: a.Number,
				Payload: []byte(`{"artifact":"receipt","reason":"the run was interrupted"}`)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.FinishRun(ctx, r.ID, store.RunFailed); err != nil {
			t.Fatal(err)
		}
		return filepath.Dir(out), shared.Path(key)
	}
	removed := func(rep *Report) []string {
		var paths []string
		for _, it := range rep.Removed {
			paths = append(paths, it.Path)
		}
		slices.Sort(paths)
		return paths
	}
	plain, plainVersion := stopped("") // its run ended it without leaving anything
	kept, keptVersion := stopped("left")
	if got, want := removed(collect()), []string{plain, plainVersion}; !slices.Equal(got, want) {
		t.Fatalf("removed %q, want only %q", got, want)
	}
	for _, p := range []string{kept, keptVersion} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("what was left for the next run is gone: %v", err)
		}
	}
	// A later attempt of charge succeeded (a forced run, say): what was
	// left is no longer what a run adopts. A check rejected that
	// attempt's version: a later run audits it again from the store once
	// the check is edited (the task is not run again), so the store's
	// copy stays; its staging folder is no use.
	rejectedStaging, rejectedVersion := stopped("rejected")
	want := []string{kept, rejectedStaging, keptVersion}
	if got := removed(collect()); !slices.Equal(got, want) {
		t.Fatalf("removed %q, want only %q", got, want)
	}
	if _, err := os.Stat(rejectedVersion); err != nil {
		t.Fatalf("the rejected version a later run may audit again is gone: %v", err)
	}
	// Another success of charge: the rejected version is no longer what a
	// run adopts.
	// Its version, recorded and never audited (a kill cut the audit
	// short), is what the next run audits: the store's copy stays.
	_, unaudited := stopped("")
	rep := collect()
	if _, err := os.Stat(rejectedVersion); !os.IsNotExist(err) {
		t.Fatalf("after a later success, %s is still there (%v); removed %+v", rejectedVersion, err, rep.Removed)
	}
	if _, err := os.Stat(unaudited); err != nil {
		t.Fatalf("the newest success's version, never audited, is gone: %v", err)
	}
}

// TestAnotherStatesFolder: gc given a folder another state's runs or
// workers keep their attempts in (a worker's --workdir with the wrong
// --state) removes nothing there, dry or not: every attempt in it is of
// runs this state does not know, or knows under the same names.
func TestAnotherStatesFolder(t *testing.T) {
	dir, st := newState(t)
	work := t.TempDir()
	leftover := filepath.Join(work, "staging", "p", "2024-01-01", "r1", "t", "1")
	if err := os.MkdirAll(leftover, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := store.ClaimScratch(work, "another-state", "postgres://prod/pipec"); err != nil {
		t.Fatal(err)
	}
	for _, dry := range []bool{true, false} {
		_, err := Collect(context.Background(), Options{Store: st, StateDir: work, StatePath: filepath.Join(dir, "state.db"), DryRun: dry})
		var inUse *store.ScratchInUseError
		if !errors.As(err, &inUse) {
			t.Errorf("gc (dry %v) of another state's folder: %v, want refused", dry, err)
		}
	}
	if _, err := os.Stat(leftover); err != nil {
		t.Errorf("another state's staging was removed: %v", err)
	}
}
