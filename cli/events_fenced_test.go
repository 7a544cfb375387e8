package cli

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

// A publish fenced at grant (a newer attempt of the task holds a higher
// token, whatever the pointer holds) is told as such by pipec events, not
// as a pointer holding token 0.
func TestEventsFencedAtGrant(t *testing.T) {
	ctx := context.Background()
	path, st, run := newStateRun(t)
	start := func() store.Attempt {
		a, err := st.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: "make", Resource: "p@2024-01-01", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	old := start()
	v, err := st.RecordVersion(ctx, store.Version{Artifact: "rows", Interval: "2024-01-01", Digest: "sha256:" + strings.Repeat("a", 64),
		Run: run.ID, Task: "make", Attempt: old.Number, Location: "p/rows/x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AcceptVersion(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	newer := start()
	res, err := st.CompareAndSwapPointer(ctx, store.Swap{Pipeline: "p", Sink: "out", Artifact: "rows", Interval: "2024-01-01",
		Version: v.ID, Token: v.Token})
	if err != nil || res.Outcome != store.Fenced {
		t.Fatalf("swap = %+v, %v; want fenced at grant", res, err)
	}
	st.Close()
	var out, errb bytes.Buffer
	if code := Main([]string{"events", run.ID, "--state", path}, IO{Stdout: &out, Stderr: &errb, Context: ctx,
		Getenv: func(string) string { return "" }}); code != 0 {
		t.Fatalf("events: exit %d\n%s", code, errb.String())
	}
	want := fmt.Sprintf("refused by sink out, as a newer attempt of the task holds token %d", newer.Token)
	if !strings.Contains(out.String(), want) || strings.Contains(out.String(), "holds token 0") {
		t.Fatalf("events output lacks %q:\n%s", want, out.String())
	}
}

// newStateRun is an SQLite state in the test's folder with a run of
// pipeline p for 2024-01-01; the test closes the store.
func newStateRun(t *testing.T) (string, *sqlite.Store, store.Run) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := st.CreateRun(context.Background(), store.NewRun{Pipeline: "p", Interval: "2024-01-01",
		IntervalStart: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), IntervalEnd: time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	return path, st, run
}

// newQueuedAttempt is newStateRun with a first attempt of its task "long",
// queued (its token granted, its process not yet recorded).
func newQueuedAttempt(t *testing.T) (string, *sqlite.Store, store.Run, store.Attempt) {
	t.Helper()
	path, st, r := newStateRun(t)
	a, err := st.StartAttempt(context.Background(), store.AttemptSpec{Run: r.ID, Task: "long",
		Resource: store.FenceResource("p", "2024-01-01"), Queued: true})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	return path, st, r, a
}
