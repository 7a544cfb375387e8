package sink

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
)

// TestSinkRefusesForeignState: two state databases, one directory sink. The
// first to publish binds it; the other's publish is refused with a
// *ForeignStateError, the link does not move, and its ReconcileAll changes
// nothing. After Adopt, the roles swap and the adopter's tokens are above
// everything the sink saw.
func TestSinkRefusesForeignState(t *testing.T) {
	ctx := context.Background()
	a, b := newFixture(t), newFixture(t)
	da := a.sink(t, a.st, FencingToken)
	db, err := NewDirectory(da.Name, da.Path, FencingToken, b.st)
	if err != nil {
		t.Fatal(err)
	}
	db.Pipeline = "orders"
	va := a.produce(t, a.st, "clean", "2024-01-01", map[string]string{"data.csv": "from a"})
	if res, err := da.Publish(ctx, va); err != nil || res.Outcome != store.Won {
		t.Fatalf("a's publish = %+v, %v", res, err)
	}
	vb := b.produce(t, b.st, "clean", "2024-01-01", map[string]string{"data.csv": "from b"})
	if vb.Token != va.Token {
		t.Logf("tokens %d and %d (the same value in both states is the case that used to flip the link)", va.Token, vb.Token)
	}
	_, err = db.Publish(ctx, vb)
	var foreign *ForeignStateError
	if !errors.As(err, &foreign) {
		t.Fatalf("b's publish = %v, want a *ForeignStateError", err)
	}
	idA, _ := a.st.StateID(ctx)
	idB, _ := b.st.StateID(ctx)
	if foreign.Bound.State != idA || foreign.State != idB || foreign.Sink != "warehouse" {
		t.Errorf("refusal = %+v", foreign)
	}
	if got := readVisible(t, da, "2024-01-01", "data.csv"); got != "from a" {
		t.Errorf("visible = %q", got)
	}
	if n := countVersionDirs(t, da); n != 1 {
		t.Errorf("%d versions in the sink: the refused state copied its data in", n)
	}
	if _, err := b.st.Pointer(ctx, "orders", "warehouse", "orders_clean", "2024-01-01"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused state's store has a pointer: %v", err)
	}
	for _, d := range []*Directory{db, da} {
		if n, err := d.ReconcileAll(ctx); err != nil || n != 0 {
			t.Errorf("ReconcileAll = %d, %v; want no change", n, err)
		}
	}
	if got := readVisible(t, da, "2024-01-01", "data.csv"); got != "from a" {
		t.Errorf("visible after reconcile = %q", got)
	}

	res, err := db.Adopt(ctx, "moved", time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC))
	if err != nil || res.Previous == nil || res.Previous.State != idA || res.Floor != va.Token {
		t.Fatalf("Adopt = %+v, %v", res, err)
	}
	vb2 := b.produce(t, b.st, "clean", "2024-01-01", map[string]string{"data.csv": "from b, adopted"})
	if vb2.Token <= va.Token {
		t.Fatalf("after adoption b's token %d is not above the sink's %d", vb2.Token, va.Token)
	}
	if res, err := db.Publish(ctx, vb2); err != nil || res.Outcome != store.Won {
		t.Fatalf("adopter's publish = %+v, %v", res, err)
	}
	if got := readVisible(t, da, "2024-01-01", "data.csv"); got != "from b, adopted" {
		t.Errorf("visible = %q", got)
	}
	va2 := a.produce(t, a.st, "clean", "2024-01-01", map[string]string{"data.csv": "a again"})
	if _, err := da.Publish(ctx, va2); !errors.As(err, &foreign) {
		t.Errorf("the old state's publish after the adoption = %v, want refused", err)
	}
	bd, err := da.Binding()
	if err != nil || bd.State != idB || len(bd.Adoptions) != 1 || bd.Adoptions[0].From != idA || bd.Adoptions[0].Reason != "moved" {
		t.Errorf("binding = %+v, %v", bd, err)
	}
}

// TestSinkRecordOutlivesTheStore: the state database is restored from a
// backup taken before the last publish, so the store forgot it. Its rerun
// publishes the older version again: the store's compare-and-swap agrees,
// the sink's own record refuses it, and the link never goes back.
func TestSinkRecordOutlivesTheStore(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	d := f.sink(t, f.st, FencingToken)
	v1 := f.produce(t, f.st, "clean", "2024-01-01", map[string]string{"data.csv": "v1"})
	if _, err := d.Publish(ctx, v1); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(f.dir, "backup.db")
	raw, err := sql.Open("sqlite", f.db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`VACUUM INTO ?`, backup); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	v2 := f.produce(t, f.st, "clean", "2024-01-01", map[string]string{"data.csv": "v2"})
	if res, err := d.Publish(ctx, v2); err != nil || res.Outcome != store.Won {
		t.Fatalf("v2 = %+v, %v", res, err)
	}
	f.st.Close()
	for _, ext := range []string{"-wal", "-shm"} {
		os.Remove(f.db + ext)
	}
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.db, b, 0o600); err != nil {
		t.Fatal(err)
	}
	st := f.open(t)
	if _, err := st.GetVersion(ctx, v2.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the restored state still knows v2: %v", err)
	}
	d2 := f.sink(t, st, FencingToken)
	if n, err := d2.ReconcileAll(ctx); err != nil || n != 0 {
		t.Errorf("ReconcileAll after the restore = %d, %v; want no change", n, err)
	}
	old, err := st.GetVersion(ctx, v1.ID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d2.Publish(ctx, old)
	if err != nil || res.Outcome != store.Fenced || res.FencedBy != "sink" || res.HeldToken != v2.Token {
		t.Fatalf("republishing v1 after the restore = %+v, %v; want fenced by the sink at %d", res, err, v2.Token)
	}
	if got := readVisible(t, d2, "2024-01-01", "data.csv"); got != "v2" {
		t.Errorf("visible = %q, want v2", got)
	}
	// The restored state's next attempt is above everything (its epoch), so
	// it publishes normally.
	v3 := f.produce(t, st, "clean", "2024-01-01", map[string]string{"data.csv": "v3"})
	if res, err := d2.Publish(ctx, v3); err != nil || res.Outcome != store.Won {
		t.Fatalf("v3 = %+v, %v", res, err)
	}
}

// TestSinkHoldsOneArtifact: a directory sink path holds one artifact of one
// pipeline; a publish of another artifact into an interval it holds is
// refused, whatever its token.
func TestSinkHoldsOneArtifact(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	d := f.sink(t, f.st, FencingToken)
	v := f.produce(t, f.st, "clean", "2024-01-01", map[string]string{"data.csv": "clean"})
	if _, err := d.Publish(ctx, v); err != nil {
		t.Fatal(err)
	}
	a, err := f.st.StartAttempt(ctx, store.AttemptSpec{Run: f.run.ID, Task: "other", Resource: store.FenceResource("orders", "2024-01-01")})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := NewStaging(filepath.Join(f.dir, StagingRoot), f.run.ID, "other", a.Number, "other")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.csv"), []byte("other"), 0o644); err != nil {
		t.Fatal(err)
	}
	digest, err := Digest(dir)
	if err != nil {
		t.Fatal(err)
	}
	ov, err := f.st.RecordVersion(ctx, store.Version{Artifact: "other", Interval: "2024-01-01", Digest: digest, Run: f.run.ID,
		Task: "other", Attempt: a.Number, Location: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.AcceptVersion(ctx, ov.ID); err != nil {
		t.Fatal(err)
	}
	ov.State = store.VersionAccepted
	_, err = d.Publish(ctx, ov)
	var other *OtherArtifactError
	if !errors.As(err, &other) || other.Held.Artifact != "orders_clean" || other.Artifact != "other" {
		t.Fatalf("publish of another artifact = %v, want *OtherArtifactError", err)
	}
	if got := readVisible(t, d, "2024-01-01", "data.csv"); got != "clean" {
		t.Errorf("visible = %q", got)
	}
}
