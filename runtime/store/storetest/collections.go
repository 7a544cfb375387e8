package storetest

import (
	"context"
	"testing"
	"time"
)

// testCollections: pipec gc's holds on the artifact versions are live
// until their lease ends on the store's clock, renewed by holding again,
// and gone when released; Collecting names the one that lasts longest.
func testCollections(t *testing.T, open single) {
	clock := newFakeClock()
	s := open(t, clock.Now)
	ctx := context.Background()
	want := func(holder string) {
		t.Helper()
		c, ok, err := s.Collecting(ctx)
		switch {
		case err != nil:
			t.Fatalf("Collecting: %v", err)
		case holder == "" && ok:
			t.Fatalf("Collecting = %+v, want none live", c)
		case holder != "" && (!ok || c.Holder != holder):
			t.Fatalf("Collecting = %+v, %v, want %s", c, ok, holder)
		}
	}
	hold := func(holder string, lease time.Duration) {
		t.Helper()
		if err := s.HoldCollection(ctx, holder, lease); err != nil {
			t.Fatal(err)
		}
	}
	want("")
	if err := s.HoldCollection(ctx, "gc0", 0); err == nil {
		t.Error("a hold without a lease was taken")
	}
	hold("gc1", time.Minute)
	if c, _, _ := s.Collecting(ctx); !c.Expiry.Equal(clock.Now().Add(time.Minute)) {
		t.Errorf("the hold's expiry = %v, want %v", c.Expiry, clock.Now().Add(time.Minute))
	}
	hold("gc2", 2*time.Minute)
	want("gc2")
	if err := s.EndCollection(ctx, "gc2"); err != nil {
		t.Fatal(err)
	}
	want("gc1")
	clock.Advance(50 * time.Second)
	hold("gc1", time.Minute) // renewed: live 60 s from now
	clock.Advance(50 * time.Second)
	want("gc1")
	clock.Advance(11 * time.Second)
	want("") // expired, not released
	hold("gc1", time.Minute)
	want("gc1")
	if err := s.EndCollection(ctx, "gc1"); err != nil {
		t.Fatal(err)
	}
	want("")
	if err := s.EndCollection(ctx, "gc1"); err != nil {
		t.Errorf("releasing a hold twice: %v", err)
	}
}
