package gc

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/s3test"
	"github.com/pipec/pipec/runtime/artifacts"
	"github.com/pipec/pipec/runtime/objstore"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
)

// TestS3ArtifactStoreCollected: on an artifact store in S3 (versitygw), gc
// removes a version that is not the current accepted one, and an upload
// without its marker once it is older than any put could still be running;
// it keeps the current accepted version.
func TestS3ArtifactStoreCollected(t *testing.T) {
	s3test.Start(t, "arts")
	ctx := context.Background()
	dir, st := newState(t)
	shared, err := artifacts.NewS3(ctx, "s3://arts/p", filepath.Join(t.TempDir(), "cache"), nil)
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	run, err := st.CreateRun(ctx, store.NewRun{Pipeline: "p", Interval: "2024-01-01", IntervalStart: day,
		IntervalEnd: day.AddDate(0, 0, 1), CodeVersion: "c", PlanDigest: "sha256:x"})
	if err != nil {
		t.Fatal(err)
	}
	put := func(content string) artifacts.Key {
		staging := t.TempDir()
		os.WriteFile(filepath.Join(staging, "rows.csv"), []byte(content), 0o644)
		frozen, digest, err := sink.Freeze(staging, filepath.Join(t.TempDir(), "local"))
		if err != nil {
			t.Fatal(err)
		}
		k, _ := artifacts.NewKey("p", "rows", digest)
		if err := shared.Put(ctx, k, frozen); err != nil {
			t.Fatal(err)
		}
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
		return k
	}
	old := put("id\n1\n")
	cur := put("id\n2\n")
	leftover := "p/p/rows/" + strings.Repeat("ab", 32) + "/rows.csv"
	if _, err := shared.Client.Put(ctx, "arts", leftover, []byte("id\n3"), objstore.Cond{}); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishRun(ctx, run.ID, store.RunSucceeded); err != nil {
		t.Fatal(err)
	}
	rep, err := Collect(ctx, Options{Store: st, StateDir: dir, Artifacts: shared})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 1 || rep.Removed[0].Path != "s3://arts/p/"+old.String() {
		t.Fatalf("removed %+v, want only the old version (the leftover may be a put in progress)", rep.Removed)
	}
	rep, err = Collect(ctx, Options{Store: st, StateDir: dir, Artifacts: shared, Now: time.Now().Add(2 * DefaultTmpAge)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 1 || !strings.Contains(rep.Removed[0].Why, "no marker") || rep.Removed[0].Bytes != 4 {
		t.Fatalf("removed %+v, want the leftover", rep.Removed)
	}
	keys, err := shared.List(ctx)
	if err != nil || !slices.Equal(keys, []artifacts.Key{cur}) {
		t.Fatalf("left %v, %v; want only %s", keys, err, cur)
	}
	if ok, _ := shared.Client.Exists(ctx, "arts", leftover); ok {
		t.Error("the leftover is still there")
	}
}
