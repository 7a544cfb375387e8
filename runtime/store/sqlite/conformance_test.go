package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	pclock "github.com/pipec/pipec/runtime/clock"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/sqlite"
	"github.com/pipec/pipec/runtime/store/storetest"
)

// TestConformance runs the contract every Store must keep against SQLite.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock store.Clock) store.Store {
		// The suite drives leases with its fake clock: here it is the lease
		// clock too (in production the lease clock is CLOCK_BOOTTIME).
		opt := sqlite.Options{Clock: clock}
		if clock != nil {
			opt.LeaseClock = pclock.Wall(clock)
		}
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
