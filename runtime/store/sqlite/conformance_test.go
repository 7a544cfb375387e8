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

// TestConformance runs the backends' conformance suite (the store, run
// slots, the queue and the capabilities) against SQLite: every handle of a
// check opens the same file, as workers in separate processes do.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock store.Clock) func(*testing.T) storetest.Handle {
		path := filepath.Join(t.TempDir(), "state.db")
		return func(t *testing.T) storetest.Handle {
			// The suite drives leases with its fake clock: here it is the
			// lease clock too (in production, CLOCK_BOOTTIME).
			opt := sqlite.Options{Clock: clock}
			if clock != nil {
				opt.LeaseClock = pclock.Wall(clock)
			}
			s, err := sqlite.Open(context.Background(), path, opt)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	})
}
