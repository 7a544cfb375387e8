package gc

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/artifacts"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
)

// TestArtifactStoreCollected: in a shared artifact store, gc removes the
// versions of this state's pipelines that are not the current accepted one
// and the puts (copies into the store) a crash left unfinished long ago; it
// keeps the current accepted version, every version of a pipeline this state
// does not know (another state sharing the store), and a put that may be in
// progress. In this machine's cache of an object store, it removes the
// copies of such versions not read for a day, and old unfinished downloads.
func TestArtifactStoreCollected(t *testing.T) {
	ctx := context.Background()
	dir, st := newState(t)
	shared, err := artifacts.NewFolder(filepath.Join(t.TempDir(), "shared"))
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	run, err := st.CreateRun(ctx, store.NewRun{Pipeline: "p", Interval: "2024-01-01", IntervalStart: day,
		IntervalEnd: day.AddDate(0, 0, 1), CodeVersion: "c", PlanDigest: "sha256:x"})
	if err != nil {
		t.Fatal(err)
	}
	// put freezes content and puts it into the shared store under
	// pipeline; with an attempt, the version is recorded and accepted.
	put := func(pipeline, content string, record bool) string {
		staging := t.TempDir()
		if err := os.WriteFile(filepath.Join(staging, "rows.csv"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		frozen, digest, err := sink.Freeze(staging, filepath.Join(t.TempDir(), "local"))
		if err != nil {
			t.Fatal(err)
		}
		k, err := artifacts.NewKey(pipeline, "rows", digest)
		if err != nil {
			t.Fatal(err)
		}
		if err := shared.Put(ctx, k, frozen); err != nil {
			t.Fatal(err)
		}
		if record {
			a, err := st.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: "make", Resource: store.FenceResource("p", "2024-01-01")})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptSucceeded}); err != nil {
				t.Fatal(err)
			}
			v, err := st.RecordVersion(ctx, store.Version{Artifact: "rows", Interval: "2024-01-01", Digest: digest, Run: run.ID,
				Task: "make", Attempt: a.Number, Location: k.String()})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.AcceptVersion(ctx, v.ID); err != nil {
				t.Fatal(err)
			}
		}
		return shared.Path(k)
	}
	old := put("p", "id\n1\n", true)
	cur := put("p", "id\n2\n", true)
	unrecorded := put("p", "id\n3\n", false) // put, then the producer died before accepting
	foreign := put("q", "id\n4\n", false)
	staleTmp := filepath.Join(filepath.Dir(cur), ".tmp-crashed")
	freshTmp := filepath.Join(filepath.Dir(cur), ".tmp-running")
	for _, p := range []string{staleTmp, freshTmp} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	if err := os.Chtimes(staleTmp, now.Add(-2*DefaultTmpAge), now.Add(-2*DefaultTmpAge)); err != nil {
		t.Fatal(err)
	}
	// This machine's cache of an object store's versions, beside the state
	// (as artifacts.S3 keeps it, a copy's time its last read): a copy not
	// current and not read for a day goes, and a download a crash left.
	cached := func(version string, age time.Duration) string {
		rel, err := filepath.Rel(shared.Root, version)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "cache", rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cachedOld, cachedRead := cached(old, 2*DefaultCacheAge), cached(unrecorded, time.Hour)
	cachedCur, cachedForeign := cached(cur, 2*DefaultCacheAge), cached(foreign, 2*DefaultCacheAge)
	cachedTmp := cached(filepath.Join(filepath.Dir(cur), ".tmp-download"), 2*DefaultTmpAge)
	if err := st.FinishRun(ctx, run.ID, store.RunSucceeded); err != nil {
		t.Fatal(err)
	}

	rep, err := Collect(ctx, Options{Store: st, StateDir: dir, Artifacts: shared, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range rep.Removed {
		got = append(got, it.Path)
	}
	slices.Sort(got)
	want := []string{old, unrecorded, staleTmp, cachedOld, cachedTmp}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("gc would remove\n%v\nwant\n%v", got, want)
	}
	if _, err := os.Stat(filepath.Join(shared.Root, ".owners")); !os.IsNotExist(err) {
		t.Errorf("a dry run recorded an owner: %v", err)
	}
	if _, err := Collect(ctx, Options{Store: st, StateDir: dir, StatePath: "/srv/state.db", Artifacts: shared}); err != nil {
		t.Fatal(err)
	}
	id, err := st.StateID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok, err := artifacts.OwnerOf(ctx, shared, "p"); err != nil || !ok || o.State != id || o.StatePath != "/srv/state.db" {
		t.Errorf("the owner of p's versions after gc: %+v %v %v, want this state", o, ok, err)
	}
	if _, ok, err := artifacts.OwnerOf(ctx, shared, "q"); ok || err != nil {
		t.Errorf("gc recorded an owner of the versions of a pipeline its state does not know: %v %v", ok, err)
	}
	for _, p := range want {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", p, err)
		}
	}
	for _, p := range []string{cur, foreign, freshTmp, cachedRead, cachedCur, cachedForeign} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(cur, "rows.csv")); err != nil || string(b) != "id\n2\n" {
		t.Errorf("the current accepted version reads %q, %v", b, err)
	}
	// Once another state owns p's versions there, gc leaves them alone,
	// the current one and the others, and says so.
	if _, _, err := artifacts.Adopt(ctx, shared, "p", artifacts.Owner{State: "other", StatePath: "/srv/other.db"}, "", now); err != nil {
		t.Fatal(err)
	}
	theirs := put("p", "id\n5\n", false)
	for _, dry := range []bool{true, false} {
		rep, err = Collect(ctx, Options{Store: st, StateDir: dir, Artifacts: shared, DryRun: dry})
		if err != nil {
			t.Fatal(err)
		}
		wantForeign := []Foreign{{Store: shared.Root, Pipeline: "p", State: "other", StatePath: "/srv/other.db"}}
		if len(rep.Removed) != 0 || !slices.Equal(rep.Foreign, wantForeign) {
			t.Errorf("gc (dry %v) of another state's versions: removed %v, foreign %+v", dry, rep.Removed, rep.Foreign)
		}
	}
	for _, p := range []string{cur, theirs} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}
