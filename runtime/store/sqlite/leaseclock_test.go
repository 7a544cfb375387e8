package sqlite

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/clock"
	"github.com/pipec/pipec/runtime/store"
)

// fakeLease is a lease clock a test moves and reboots by hand.
type fakeLease struct {
	mu sync.Mutex
	r  clock.Reading
}

func (f *fakeLease) now() clock.Reading {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.r
}

func (f *fakeLease) set(boot string, ns int64) {
	f.mu.Lock()
	f.r = clock.Reading{Boot: boot, Nanos: ns}
	f.mu.Unlock()
}

// Leases follow the lease clock, not the wall clock: a wall step of a day
// expires nothing, the lease clock passing the expiry does, and a new boot
// expires every lease of the old one, run leases included.
func TestLeasesFollowTheLeaseClock(t *testing.T) {
	ctx := context.Background()
	var wallMu sync.Mutex
	wall := time.Date(2024, 1, 2, 3, 0, 0, 0, time.UTC)
	lc := &fakeLease{r: clock.Reading{Boot: "b1", Nanos: 1000}}
	s, err := Open(ctx, filepath.Join(t.TempDir(), "state.db"), Options{
		Clock:      func() time.Time { wallMu.Lock(); defer wallMu.Unlock(); return wall },
		LeaseClock: lc.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run, err := s.CreateRun(ctx, store.NewRun{Pipeline: "p", Interval: "2024-01-01", Lease: time.Minute, Owner: store.RunOwner{Host: "h", PID: 1}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: "t", Resource: store.FenceResource("p", "2024-01-01"), Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	wallMu.Lock()
	wall = wall.Add(24 * time.Hour) // the wall clock steps a day
	wallMu.Unlock()
	if got, err := s.MarkUnknown(ctx); err != nil || len(got) != 0 {
		t.Fatalf("a wall step expired %+v, %v", got, err)
	}
	if _, err := s.CreateRun(ctx, store.NewRun{Pipeline: "p", Interval: "2024-01-01", Lease: time.Minute}); err == nil {
		t.Fatal("a wall step expired the run lease")
	}
	lc.set("b1", 1000+int64(time.Second)) // the lease clock reaches the expiry
	if got, err := s.MarkUnknown(ctx); err != nil || len(got) != 1 || got[0].AttemptRef != a.AttemptRef {
		t.Fatalf("MarkUnknown at expiry = %+v, %v", got, err)
	}
	// A reboot: a small reading of another boot, yet every lease of b1 is gone.
	a2, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: "t", Resource: store.FenceResource("p", "2024-01-01"), Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	lc.set("b2", 5)
	if got, err := s.MarkUnknown(ctx); err != nil || len(got) != 1 || got[0].AttemptRef != a2.AttemptRef {
		t.Fatalf("MarkUnknown after a reboot = %+v, %v", got, err)
	}
	if _, err := s.CreateRun(ctx, store.NewRun{Pipeline: "p", Interval: "2024-01-01", Lease: time.Minute}); err != nil {
		t.Fatalf("the run lease of the old boot held: %v", err)
	}
}
