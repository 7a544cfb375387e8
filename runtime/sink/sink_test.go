package sink

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

// fixture is a work directory with a state database and one running run.
type fixture struct {
	dir string
	db  string
	st  *sqlite.Store
	run store.Run
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{dir: dir, db: filepath.Join(dir, ".pipec", "state.db")}
	f.st = f.open(t)
	r, err := f.st.CreateRun(context.Background(), store.NewRun{
		Pipeline: "orders", Interval: "2024-01-01", CodeVersion: "2024.06.1", PlanDigest: "sha256:plan",
		IntervalStart: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), IntervalEnd: time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.run = r
	return f
}

// open opens another handle on the fixture's database.
func (f *fixture) open(t testing.TB) *sqlite.Store {
	t.Helper()
	// The racing tests queue up to 8 handles behind SQLite's write lock, each
	// commit an fsync: under a loaded CI disk a writer can wait past the
	// default 30s without anything being wrong. What they check is fencing,
	// not how long a slow disk makes a writer wait.
	st, err := sqlite.Open(context.Background(), f.db, sqlite.Options{BusyTimeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func (f *fixture) sink(t testing.TB, st store.Store, fencing string) *Directory {
	t.Helper()
	d, err := NewDirectory("warehouse", filepath.Join(f.dir, "warehouse", "orders"), fencing, st)
	if err != nil {
		t.Fatal(err)
	}
	d.Pipeline = "orders"
	return d
}

// produce runs the write half of write-audit-publish for one attempt of task:
// a fresh staging directory with files, its digest, the version recorded and
// accepted.
func (f *fixture) produce(t testing.TB, st store.Store, task, interval string, files map[string]string) store.Version {
	t.Helper()
	v, err := f.tryProduce(st, task, interval, files)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (f *fixture) tryProduce(st store.Store, task, interval string, files map[string]string) (store.Version, error) {
	ctx := context.Background()
	a, err := st.StartAttempt(ctx, store.AttemptSpec{Run: f.run.ID, Task: task, Resource: store.FenceResource("orders", interval)})
	if err != nil {
		return store.Version{}, err
	}
	dir, err := NewStaging(filepath.Join(f.dir, StagingRoot), f.run.ID, task, a.Number, "orders_clean")
	if err != nil {
		return store.Version{}, err
	}
	if err := writeFiles(dir, files); err != nil {
		return store.Version{}, err
	}
	digest, err := Digest(dir)
	if err != nil {
		return store.Version{}, err
	}
	v, err := st.RecordVersion(ctx, store.Version{Artifact: "orders_clean", Interval: interval, Digest: digest,
		Run: f.run.ID, Task: task, Attempt: a.Number, Location: dir})
	if err != nil {
		return store.Version{}, err
	}
	if err := st.AcceptVersion(ctx, v.ID); err != nil {
		return store.Version{}, err
	}
	v.State = store.VersionAccepted
	return v, nil
}

// writeFiles writes files (slash paths under dir: content) into dir.
func writeFiles(dir string, files map[string]string) error {
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func readVisible(t testing.TB, d *Directory, interval, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.Path, interval, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func countVersionDirs(t testing.TB, d *Directory) int {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(d.Path, VersionsDir))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	return n
}

func TestStagingPath(t *testing.T) {
	got, err := StagingPath(".pipec/staging", "orders/2024-01-01/r1", "clean", 3, "orders_clean")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.FromSlash(".pipec/staging/orders/2024-01-01/r1/clean/3/orders_clean"); got != want {
		t.Errorf("StagingPath = %s, want %s", got, want)
	}
	for _, bad := range [][3]string{
		{"orders/../../etc", "clean", "a"},
		{"orders/2024-01-01/r1", "..", "a"},
		{"orders/2024-01-01/r1", "clean", "a/b"},
		{"", "clean", "a"},
	} {
		if _, err := StagingPath("root", bad[0], bad[1], 1, bad[2]); err == nil {
			t.Errorf("StagingPath(%q) accepted an unsafe name", bad)
		}
	}
	if _, err := StagingPath("root", "r", "t", 0, "a"); err == nil {
		t.Error("attempt 0 accepted")
	}
}

func TestNewStagingIsFresh(t *testing.T) {
	root := t.TempDir()
	dir, err := NewStaging(root, "orders/2024-01-01/r1", "clean", 1, "orders_clean")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "debris"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := NewStaging(root, "orders/2024-01-01/r1", "clean", 1, "orders_clean")
	if err != nil || again != dir {
		t.Fatalf("NewStaging again = %s, %v", again, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("staging directory not fresh: %v", ents)
	}
}

func TestDigest(t *testing.T) {
	write := func(files map[string]string, order []string) string {
		dir := t.TempDir()
		for _, name := range order {
			p := filepath.Join(dir, filepath.FromSlash(name))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(files[name]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		d, err := Digest(dir)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	files := map[string]string{"a.csv": "id\n1\n", "sub/b.csv": "id\n2\n", "a.csv.bak": ""}
	d1 := write(files, []string{"a.csv", "sub/b.csv", "a.csv.bak"})
	d2 := write(files, []string{"a.csv.bak", "sub/b.csv", "a.csv"})
	if d1 != d2 {
		t.Errorf("digest depends on creation order: %s vs %s", d1, d2)
	}
	if !strings.HasPrefix(d1, "sha256:") || len(d1) != len("sha256:")+64 {
		t.Errorf("digest %q is not sha256:<hex>", d1)
	}
	if d := write(map[string]string{"a.csv": "id\n1\n", "sub/b.csv": "id\n3\n", "a.csv.bak": ""}, []string{"a.csv", "sub/b.csv", "a.csv.bak"}); d == d1 {
		t.Error("digest ignores content")
	}
	if d := write(map[string]string{"a.csv": "id\n1\n", "sub/c.csv": "id\n2\n", "a.csv.bak": ""}, []string{"a.csv", "sub/c.csv", "a.csv.bak"}); d == d1 {
		t.Error("digest ignores names")
	}
	// Moving bytes from one file to the next must change the digest.
	if write(map[string]string{"a": "xy", "b": ""}, []string{"a", "b"}) == write(map[string]string{"a": "x", "b": "y"}, []string{"a", "b"}) {
		t.Error("digest is ambiguous about file boundaries")
	}
	dir := t.TempDir()
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := Digest(dir); err == nil {
		t.Error("a symbolic link in a version was accepted")
	}
}

func TestPublishFencesAndIsIdempotent(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := f.sink(t, f.st, FencingToken)
	old := f.produce(t, f.st, "clean", "2024-01-01", map[string]string{"data.csv": "id\nold\n"})
	cur := f.produce(t, f.st, "clean", "2024-01-01", map[string]string{"data.csv": "id\nnew\n", "part/2.csv": "id\nnew2\n"})

	res, err := d.Publish(ctx, cur)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != store.Won || res.Unfenced || res.Pointer.Token != cur.Token {
		t.Fatalf("first publish = %+v", res)
	}
	if got := readVisible(t, d, "2024-01-01", "data.csv"); got != "id\nnew\n" {
		t.Errorf("visible data.csv = %q", got)
	}
	if got := readVisible(t, d, "2024-01-01", "part/2.csv"); got != "id\nnew2\n" {
		t.Errorf("visible part/2.csv = %q", got)
	}
	vis, err := d.Visible("2024-01-01")
	if err != nil || vis != res.VersionDir || filepath.Base(vis) != VersionName(cur) {
		t.Errorf("Visible = %s, %v; want %s", vis, err, res.VersionDir)
	}
	if got, err := ContentDigest(vis); err != nil || got != cur.Digest {
		t.Errorf("published copy digest %s, %v; want %s", got, err, cur.Digest)
	}
	if fi, err := os.Stat(filepath.Join(vis, "data.csv")); err != nil || fi.Mode().Perm()&0o222 != 0 {
		t.Errorf("a published file is writable: %v, %v", fi.Mode(), err)
	}

	again, err := d.Publish(ctx, cur)
	if err != nil || again.Outcome != store.Idempotent {
		t.Fatalf("publishing the same version and token again = %+v, %v", again, err)
	}
	stale, err := d.Publish(ctx, old)
	if err != nil || stale.Outcome != store.Fenced || stale.Pointer.Version != cur.ID {
		t.Fatalf("stale publish = %+v, %v", stale, err)
	}
	if got := readVisible(t, d, "2024-01-01", "data.csv"); got != "id\nnew\n" {
		t.Errorf("a fenced publish changed the visible data: %q", got)
	}
	evs, err := f.st.Events(ctx, f.run.ID)
	if err != nil {
		t.Fatal(err)
	}
	fenced := 0
	for _, e := range evs {
		if e.Kind == store.EventPublishFenced && e.Attempt == old.Attempt {
			fenced++
		}
	}
	if fenced != 1 {
		t.Errorf("%d publish.fenced events for the stale attempt, want 1", fenced)
	}

	// Staging modified after the audit: the copy's digest differs, nothing is
	// published.
	late := f.produce(t, f.st, "clean", "2024-01-01", map[string]string{"data.csv": "id\naudited\n"})
	if err := os.WriteFile(filepath.Join(late.Location, "data.csv"), []byte("id\nswapped after audit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Publish(ctx, late); err == nil || !strings.Contains(err.Error(), "staging changed after the audit") {
		t.Fatalf("publishing a changed staging dir: %v", err)
	}
	if p, _ := f.st.Pointer(ctx, "orders", "warehouse", "orders_clean", "2024-01-01"); p.Version != cur.ID {
		t.Errorf("pointer moved to %d after a refused publish", p.Version)
	}
	// Only cur: old was fenced before it was copied, late was refused.
	if n := countVersionDirs(t, d); n != 1 {
		t.Errorf("%d version folders, want 1", n)
	}

	staged := late
	staged.State = store.VersionStaged
	if _, err := d.Publish(ctx, staged); err == nil {
		t.Error("published a version that is not accepted")
	}
	if _, err := d.Publish(ctx, store.Version{Artifact: "orders_clean", Interval: "../x", State: store.VersionAccepted}); err == nil {
		t.Error("published to an interval outside the sink")
	}
}

// TestLostResponseReconciled is fault test 2 at the sink: the swap won in the
// store, the publisher died before the link swap; publishing again completes
// it without a second version, and so does ReconcileAll.
func TestLostResponseReconciled(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := f.sink(t, f.st, FencingToken)
	v1 := f.produce(t, f.st, "clean", "2024-01-01", map[string]string{"data.csv": "v1"})
	if _, err := d.Publish(ctx, v1); err != nil {
		t.Fatal(err)
	}
	for _, viaReconcile := range []bool{false, true} {
		v := f.produce(t, f.st, "clean", "2024-01-01", map[string]string{"data.csv": fmt.Sprint("v2 ", viaReconcile)})
		// Steps 1 and 2 of Publish, then the crash.
		if err := d.materialize(context.Background(), v); err != nil {
			t.Fatal(err)
		}
		res, err := f.st.CompareAndSwapPointer(ctx, store.Swap{Pipeline: "orders", Sink: d.Name, Artifact: v.Artifact, Interval: v.Interval, Version: v.ID, Token: v.Token})
		if err != nil || res.Outcome != store.Won {
			t.Fatalf("swap = %+v, %v", res, err)
		}
		before := readVisible(t, d, "2024-01-01", "data.csv")
		if before == fmt.Sprint("v2 ", viaReconcile) {
			t.Fatal("link swapped without Publish")
		}
		dirs := countVersionDirs(t, d)
		if viaReconcile {
			n, err := d.ReconcileAll(ctx)
			if err != nil || n != 1 {
				t.Fatalf("ReconcileAll = %d, %v", n, err)
			}
		} else {
			res, err := d.Publish(ctx, v)
			if err != nil || res.Outcome != store.Idempotent {
				t.Fatalf("rerun publish = %+v, %v", res, err)
			}
		}
		if got := readVisible(t, d, "2024-01-01", "data.csv"); got != fmt.Sprint("v2 ", viaReconcile) {
			t.Errorf("after reconciliation visible = %q", got)
		}
		if n := countVersionDirs(t, d); n != dirs {
			t.Errorf("reconciliation made a second copy: %d folders, had %d", n, dirs)
		}
	}
	debris := filepath.Join(d.Path, ".link-2024-01-01-deadbeef")
	if err := os.Symlink(filepath.Join(VersionsDir, "x"), debris); err != nil {
		t.Fatal(err)
	}
	if n, err := d.ReconcileAll(ctx); err != nil || n != 0 {
		t.Errorf("ReconcileAll on a reconciled sink = %d, %v", n, err)
	}
	if _, err := os.Lstat(debris); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a crashed publish's temporary link survived ReconcileAll: %v", err)
	}
}

// TestReconcileAllFindsEveryCrash leaves intervals of one sink in each
// state a crashed publish can leave one in, beside intervals that are
// settled, and checks that one ReconcileAll repairs exactly those: it reads
// only the intervals whose link does not already show the token of the
// store's pointer, so each crash must show there.
func TestReconcileAllFindsEveryCrash(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := f.sink(t, f.st, FencingToken)
	days := []string{"2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"}
	for _, iv := range days {
		if _, err := d.Publish(ctx, f.produce(t, f.st, "clean", iv, map[string]string{"data.csv": "v1 " + iv})); err != nil {
			t.Fatal(err)
		}
	}
	f.swappedAhead(t, d, "2024-01-02") // stopped before the sink's record
	v3 := f.swappedAhead(t, d, "2024-01-03")
	stateID, err := f.st.StateID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.writeRecord(Record{Pipeline: v3.Pipeline, Artifact: v3.Artifact, Interval: v3.Interval, Token: v3.Token,
		Version: VersionName(v3), Digest: v3.Digest, State: stateID, Run: v3.Run, Attempt: v3.Attempt}); err != nil {
		t.Fatal(err) // stopped before the link swap
	}
	if err := os.Remove(filepath.Join(d.Path, "2024-01-04")); err != nil {
		t.Fatal(err) // a link lost
	}
	n, err := d.ReconcileAll(ctx)
	if err != nil || n != 3 {
		t.Fatalf("ReconcileAll = %d, %v; want the 3 crashed intervals repaired", n, err)
	}
	for _, iv := range days {
		want := "v1 " + iv
		if iv == "2024-01-02" || iv == "2024-01-03" {
			want = "v2 " + iv
		}
		if got := readVisible(t, d, iv, "data.csv"); got != want {
			t.Errorf("%s shows %q, want %q", iv, got, want)
		}
		rec, err := d.readRecord(iv)
		if err != nil || rec == nil {
			t.Fatalf("%s: record %v, %v", iv, rec, err)
		}
		if vis, _ := d.Visible(iv); filepath.Base(vis) != rec.Version {
			t.Errorf("%s shows %s, its record says %s", iv, filepath.Base(vis), rec.Version)
		}
	}
	if n, err := d.ReconcileAll(ctx); err != nil || n != 0 {
		t.Errorf("ReconcileAll on a reconciled sink = %d, %v", n, err)
	}
}

// swappedAhead is a newer version of iv ("v2 <iv>") that won in the store
// and was copied into the sink d: a publish stopped after its step 3, the
// store's pointer ahead of the sink's record and link.
func (f *fixture) swappedAhead(t testing.TB, d *Directory, iv string) store.Version {
	t.Helper()
	ctx := context.Background()
	v := f.produce(t, f.st, "clean", iv, map[string]string{"data.csv": "v2 " + iv})
	if err := d.materialize(ctx, v); err != nil {
		t.Fatal(err)
	}
	res, err := f.st.CompareAndSwapPointer(ctx, store.Swap{Pipeline: "orders", Sink: d.Name, Artifact: v.Artifact,
		Interval: v.Interval, Version: v.ID, Token: v.Token})
	if err != nil || res.Outcome != store.Won {
		t.Fatalf("swap = %+v, %v", res, err)
	}
	return v
}

// settledWithShown is a fenced sink with three intervals published ("v1
// <day>" in data.csv), then reconciled with a Shown, as a backfill's first
// run leaves it; days are the intervals.
func (f *fixture) settledWithShown(t *testing.T) (*Directory, []string) {
	t.Helper()
	ctx := context.Background()
	d := f.sink(t, f.st, FencingToken)
	days := []string{"2024-01-01", "2024-01-02", "2024-01-03"}
	for _, iv := range days {
		if _, err := d.Publish(ctx, f.produce(t, f.st, "clean", iv, map[string]string{"data.csv": "v1 " + iv})); err != nil {
			t.Fatal(err)
		}
	}
	d.Shown = new(Shown)
	if n, err := d.ReconcileAll(ctx); err != nil || n != 0 {
		t.Fatalf("ReconcileAll of a settled sink = %d, %v", n, err)
	}
	return d, days
}

// showsVersions checks that each of days shows "v2 <day>" in data.csv if
// it is one of republished, else "v1 <day>" (settledWithShown's).
func showsVersions(t *testing.T, d *Directory, days []string, republished ...string) {
	t.Helper()
	for _, iv := range days {
		want := "v1 " + iv
		if slices.Contains(republished, iv) {
			want = "v2 " + iv
		}
		if got := readVisible(t, d, iv, "data.csv"); got != want {
			t.Errorf("%s shows %q, want %q", iv, got, want)
		}
	}
}

// TestReconcileAllRemembersShownLinks: with a Shown kept across runs (a
// backfill's), a run's start reads again only the links whose pointer
// changed since an earlier run saw them shown, so a publish that crashed
// in another process after the store's swap is still repaired, while a
// link removed by hand, its pointer unchanged, waits for a run with a
// fresh Shown (the next process).
func TestReconcileAllRemembersShownLinks(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d, days := f.settledWithShown(t)
	f.swappedAhead(t, d, "2024-01-02")
	if err := os.Remove(filepath.Join(d.Path, "2024-01-03")); err != nil {
		t.Fatal(err)
	}
	if n, err := d.ReconcileAll(ctx); err != nil || n != 1 {
		t.Fatalf("ReconcileAll with what the first saw = %d, %v; want the crashed publish repaired", n, err)
	}
	if got := readVisible(t, d, "2024-01-02", "data.csv"); got != "v2 2024-01-02" {
		t.Errorf("2024-01-02 shows %q after the crash was repaired", got)
	}
	if _, err := os.Lstat(filepath.Join(d.Path, "2024-01-03")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the link removed by hand, its pointer seen shown before, was read again: %v", err)
	}
	d.Shown = new(Shown)
	if n, err := d.ReconcileAll(ctx); err != nil || n != 1 {
		t.Fatalf("ReconcileAll of the next process = %d, %v; want the lost link repaired", n, err)
	}
	showsVersions(t, d, days, "2024-01-02")
}

// TestReconcileAllSkipsASettledSink: a run's start with a Shown that saw
// every link settled at the store's generation of the sink's pointers
// reads nothing more of the sink (not even the temporary links a crash
// left, which any other reconcile removes), also after a publish of its
// own process; a swap of another process moves the generation, and the
// next run's start reads the sink and repairs that swap's crash.
func TestReconcileAllSkipsASettledSink(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d, days := f.settledWithShown(t)
	debris := filepath.Join(d.Path, ".link-debris")
	if err := os.Symlink(filepath.Join(VersionsDir, "gone"), debris); err != nil {
		t.Fatal(err)
	}
	read := func() bool {
		_, err := os.Lstat(debris)
		return errors.Is(err, fs.ErrNotExist)
	}
	if n, err := d.ReconcileAll(ctx); err != nil || n != 0 || read() {
		t.Fatalf("ReconcileAll with no pointer moved = %d, %v, sink read: %v; want nothing read", n, err, read())
	}
	// This process's own publish moves the generation and settles its link.
	if res, err := d.Publish(ctx, f.produce(t, f.st, "clean", "2024-01-02", map[string]string{"data.csv": "v2 2024-01-02"})); err != nil || res.Outcome != store.Won {
		t.Fatalf("publish = %+v, %v", res, err)
	}
	if n, err := d.ReconcileAll(ctx); err != nil || n != 0 || read() {
		t.Fatalf("ReconcileAll after a publish of its own = %d, %v, sink read: %v; want nothing read", n, err, read())
	}
	// Another process's publish, crashed after the store's swap.
	f.swappedAhead(t, d, "2024-01-03")
	if n, err := d.ReconcileAll(ctx); err != nil || n != 1 || !read() {
		t.Fatalf("ReconcileAll after another process's swap = %d, %v, sink read: %v; want the crash repaired", n, err, read())
	}
	showsVersions(t, d, days, "2024-01-02", "2024-01-03")
	if n, err := d.ReconcileAll(ctx); err != nil || n != 0 {
		t.Fatalf("ReconcileAll once settled again = %d, %v", n, err)
	}
}

func TestUnfencedSinkIsAtLeastOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := f.sink(t, f.st, FencingNone)
	older := f.produce(t, f.st, "clean", "2024-01-01", map[string]string{"data.csv": "older"})
	newer := f.produce(t, f.st, "clean", "2024-01-01", map[string]string{"data.csv": "newer"})
	if res, err := d.Publish(ctx, newer); err != nil || res.Outcome != store.Won || !res.Unfenced {
		t.Fatalf("publish newer = %+v, %v", res, err)
	}
	res, err := d.Publish(ctx, older)
	if err != nil || res.Outcome != store.Won || !res.Unfenced || !res.Pointer.Unfenced {
		t.Fatalf("an unfenced sink must take the stale write and say so: %+v, %v", res, err)
	}
	if got := readVisible(t, d, "2024-01-01", "data.csv"); got != "older" {
		t.Errorf("visible = %q", got)
	}
}

func TestVisibleNothingPublished(t *testing.T) {
	f := newFixture(t)
	d := f.sink(t, f.st, FencingToken)
	if _, err := d.Visible("2024-01-01"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Visible before any publish: %v, want fs.ErrNotExist", err)
	}
	if _, err := NewDirectory("s", "p", "sometimes", f.st); err == nil {
		t.Error("NewDirectory accepted fencing \"sometimes\"")
	}
}

// TestFreezeBigVersion freezes a version of more files than one batch of
// fsyncs holds: every file copied read-only with its bytes, the digest
// the staging's, and no descriptor left open, also when the same content
// is frozen again and when a copy fails, each with a batch of files
// written and not yet synced.
func TestFreezeBigVersion(t *testing.T) {
	const files = 2*syncBatch + syncBatch/2
	staging := t.TempDir()
	content := map[string]string{"zz.csv": "last\n"}
	for i := range files {
		content[fmt.Sprintf("part=%d/f%03d.csv", i%2, i)] = fmt.Sprintf("id\n%d\n", i)
	}
	if err := writeFiles(staging, content); err != nil {
		t.Fatal(err)
	}
	want, err := Digest(staging)
	if err != nil {
		t.Fatal(err)
	}
	open := openDescriptors(t)
	root := t.TempDir()
	dir, digest, err := Freeze(staging, root)
	if err != nil || digest != want {
		t.Fatalf("Freeze = %s, %v; want digest %s", digest, err, want)
	}
	if n := openDescriptors(t); n != open {
		t.Errorf("%d descriptors open after Freeze, %d before", n, open)
	}
	// The same content again: the folder already frozen, and the copy,
	// thrown away unsynced, leaves no descriptor and no folder behind.
	again, digest, err := Freeze(staging, root)
	if err != nil || again != dir || digest != want {
		t.Fatalf("Freeze again = %s %s, %v; want %s %s", again, digest, err, dir, want)
	}
	if n := openDescriptors(t); n != open {
		t.Errorf("%d descriptors open after freezing the same content again, %d before", n, open)
	}
	if ents, err := os.ReadDir(root); err != nil || len(ents) != 1 {
		t.Errorf("the root holds %v (%v); want the one frozen folder", ents, err)
	}
	for rel, s := range content {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		b, err := os.ReadFile(p)
		if err != nil || string(b) != s {
			t.Fatalf("%s = %q, %v; want %q", rel, b, err, s)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o444 {
			t.Fatalf("%s: %v, %v; want read-only", rel, fi, err)
		}
	}

	// zz.csv is copied last, after the partitions' files, half a batch of
	// them written and not yet synced; its name is taken in the
	// destination, so the copy fails there.
	dst := t.TempDir()
	if err := os.WriteFile(filepath.Join(dst, "zz.csv"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := walkCopy(staging, dst); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("walkCopy onto a taken name = %v, want an error saying it exists", err)
	}
	if n := openDescriptors(t); n != open {
		t.Errorf("%d descriptors open after a failed copy, %d before", n, open)
	}
}

// openDescriptors counts this process's open file descriptors.
func openDescriptors(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd to count descriptors in: %v", err)
	}
	return len(ents)
}
