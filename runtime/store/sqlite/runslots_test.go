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

// TestRunSlots runs the max_active_runs checks against SQLite: every handle
// of a check opens the same file, as separate processes do.
func TestRunSlots(t *testing.T) {
	storetest.RunSlots(t, func(t *testing.T, clock store.Clock) func(*testing.T) storetest.Handle {
		path := filepath.Join(t.TempDir(), "state.db")
		return func(t *testing.T) storetest.Handle {
			opt := sqlite.Options{Clock: clock}
			if clock != nil {
				opt.LeaseClock = pclock.Wall(clock)
			}
			s, err := sqlite.Open(context.Background(), path, opt)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return storetest.Handle{Store: s, Queue: s}
		}
	})
}
