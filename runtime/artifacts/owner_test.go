package artifacts_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/s3test"
	"github.com/pipec/pipec/runtime/artifacts"
)

// The owner of a pipeline's versions is recorded once, by the first state,
// on a folder store and on an S3 store alike.
func TestOwner(t *testing.T) {
	for _, kind := range []string{"folder", "s3"} {
		t.Run(kind, func(t *testing.T) {
			open := ownerStores(t, kind)
			testOwnerFirstStateWins(t, open())
			testOwnerRaced(t, open)
			testOwnerAdopted(t, open())
		})
	}
}

// ownerStores returns a function opening another handle on one fresh store
// of the kind, as another process would.
func ownerStores(t *testing.T, kind string) func() artifacts.Store {
	n := 0
	var location string
	switch kind {
	case "folder":
		location = t.TempDir()
	case "s3":
		s3test.Start(t, "arts")
		location = "s3://arts/owned"
	}
	return func() artifacts.Store {
		n++
		s, err := artifacts.OpenIn(location, filepath.Join(t.TempDir(), fmt.Sprint("cache", n)), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// The first state owns the pipeline's versions, again and again; another
// state is refused with a message naming both and the record to remove;
// another pipeline is another's to own; the record is neither a version nor
// a leftover to collect.
func testOwnerFirstStateWins(t *testing.T, s artifacts.Store) {
	ctx := context.Background()
	a := artifacts.Owner{State: "state-a", StatePath: "/srv/prod/state.db"}
	b := artifacts.Owner{State: "state-b", StatePath: "/srv/staging/state.db"}
	if _, ok, err := artifacts.OwnerOf(ctx, s, "orders"); ok || err != nil {
		t.Fatalf("an owner before any was recorded: %v %v", ok, err)
	}
	dir, k := frozenVersion(t, "id\n1\n")
	if err := s.Put(ctx, k, dir); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := artifacts.Own(ctx, s, "orders", a); err != nil {
			t.Fatalf("the first state: %v", err)
		}
	}
	err := artifacts.Own(ctx, s, "orders", b)
	var foreign *artifacts.ForeignOwnerError
	if !errors.As(err, &foreign) {
		t.Fatalf("another state: %v, want a ForeignOwnerError", err)
	}
	for _, want := range []string{"state-a (/srv/prod/state.db)", "state-b (/srv/staging/state.db)", "pipeline orders",
		".owners/orders", "must not share an artifact store"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if got, ok, err := artifacts.OwnerOf(ctx, s, "orders"); err != nil || !ok || got.State != a.State || got.StatePath != a.StatePath {
		t.Fatalf("owner after the refusal: %+v %v %v, want state-a", got, ok, err)
	}
	if err := artifacts.Own(ctx, s, "billing", b); err != nil {
		t.Fatalf("another pipeline: %v", err)
	}
	if keys, err := s.List(ctx); err != nil || len(keys) != 1 || keys[0] != k {
		t.Errorf("list with owners recorded: %v %v, want only %s", keys, err, k)
	}
	switch s := s.(type) {
	case *artifacts.Folder:
		if temps, err := s.Temps(); err != nil || len(temps) > 0 {
			t.Errorf("owner records taken for leftovers: %v %v", temps, err)
		}
	case *artifacts.S3:
		if unc, err := s.Uncommitted(ctx); err != nil || len(unc) > 0 {
			t.Errorf("owner records taken for leftovers: %v %v", unc, err)
		}
	}
}

// Of states racing to own a pipeline's versions, each through its own
// handle, exactly one wins and every other is told which.
func testOwnerRaced(t *testing.T, open func() artifacts.Store) {
	ctx := context.Background()
	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		s := open()
		wg.Go(func() {
			errs[i] = artifacts.Own(ctx, s, "raced", artifacts.Owner{State: fmt.Sprint("state-", i)})
		})
	}
	wg.Wait()
	winner := ""
	for i, err := range errs {
		var foreign *artifacts.ForeignOwnerError
		switch {
		case err == nil && winner == "":
			winner = fmt.Sprint("state-", i)
		case err == nil:
			t.Fatalf("two states own the versions: %s and state-%d", winner, i)
		case !errors.As(err, &foreign):
			t.Fatalf("state-%d: %v", i, err)
		}
	}
	if winner == "" {
		t.Fatal("no state owns the versions")
	}
	for i, err := range errs {
		var foreign *artifacts.ForeignOwnerError
		if errors.As(err, &foreign) && foreign.Owner.State != winner {
			t.Errorf("state-%d was told %s owns them, not %s", i, foreign.Owner.State, winner)
		}
	}
}

// A state adopts the versions another state owns: the takeover is
// recorded with its reason, the previous owner is refused from then on,
// and adopting again changes nothing.
func testOwnerAdopted(t *testing.T, s artifacts.Store) {
	ctx := context.Background()
	old := artifacts.Owner{State: "old", StatePath: "/srv/old.db"}
	moved := artifacts.Owner{State: "new", StatePath: "/srv/new.db"}
	if err := artifacts.Own(ctx, s, "moved", old); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	prev, had, err := artifacts.Adopt(ctx, s, "moved", moved, "the state moved to PostgreSQL", at)
	if err != nil || !had || prev.State != "old" {
		t.Fatalf("adopt: %+v %v %v, want the old owner", prev, had, err)
	}
	got, _, err := artifacts.OwnerOf(ctx, s, "moved")
	want := []artifacts.Adoption{{From: "old", FromPath: "/srv/old.db", To: "new", ToPath: "/srv/new.db",
		Reason: "the state moved to PostgreSQL", At: "2026-12-07T10:00:00Z"}}
	if err != nil || got.State != "new" || !slices.Equal(got.Adoptions, want) {
		t.Fatalf("owner after the adoption: %+v %v", got, err)
	}
	if err := artifacts.Own(ctx, s, "moved", moved); err != nil {
		t.Errorf("the adopting state: %v", err)
	}
	var foreign *artifacts.ForeignOwnerError
	if err := artifacts.Own(ctx, s, "moved", old); !errors.As(err, &foreign) {
		t.Errorf("the previous owner after the adoption: %v, want a ForeignOwnerError", err)
	}
	if prev, had, err := artifacts.Adopt(ctx, s, "moved", moved, "again", at.Add(time.Hour)); err != nil || !had || prev.State != "new" {
		t.Errorf("adopting again: %+v %v %v", prev, had, err)
	}
	if got, _, _ := artifacts.OwnerOf(ctx, s, "moved"); len(got.Adoptions) != 1 {
		t.Errorf("adopting again recorded another adoption: %+v", got.Adoptions)
	}
	if _, had, err := artifacts.Adopt(ctx, s, "fresh", moved, "", at); err != nil || had {
		t.Errorf("adopting versions no state owned: %v %v", had, err)
	}
	if err := artifacts.Own(ctx, s, "fresh", old); !errors.As(err, &foreign) {
		t.Errorf("another state after an adoption of unowned versions: %v", err)
	}
}

// A damaged owner record is an error, never taken as no owner (which would
// let any state collect the versions).
func TestOwnerRecordDamaged(t *testing.T) {
	root := t.TempDir()
	s, err := artifacts.NewFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := artifacts.Own(ctx, s, "orders", artifacts.Owner{State: "a"}); err != nil {
		t.Fatal(err)
	}
	for _, content := range []string{"", "{", `{"state": ""}`, "null"} {
		if err := os.WriteFile(filepath.Join(root, ".owners", "orders.json"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := artifacts.OwnerOf(ctx, s, "orders"); err == nil || ok {
			t.Errorf("record %q read as %v, %v", content, ok, err)
		}
		if err := artifacts.Own(ctx, s, "orders", artifacts.Owner{State: "b"}); err == nil {
			t.Errorf("record %q: another state took the versions", content)
		}
	}
}

// An owner record is read from storage other processes write: whatever it
// holds, reading it returns an owner with a state or an error, and never
// panics.
func FuzzOwnerRecord(f *testing.F) {
	f.Add([]byte(`{"state":"a","state_path":"/x","adoptions":[{"from":"b","to":"a","at":"2026-12-07T10:00:00Z"}]}`))
	f.Add([]byte(`{"state":""}`))
	f.Add([]byte(`[]`))
	f.Add([]byte("\xff"))
	root := f.TempDir()
	s, err := artifacts.NewFolder(root)
	if err != nil {
		f.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, ".owners"), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(root, ".owners", "p.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		o, ok, err := artifacts.OwnerOf(context.Background(), s, "p")
		if (err == nil) != ok || ok && o.State == "" {
			t.Fatalf("%q read as %+v, %v, %v", data, o, ok, err)
		}
	})
}
