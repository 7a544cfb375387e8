package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/storetest"
)

// TestConformance runs the contract every Store must keep against SQLite.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock store.Clock) store.Store {
		s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), store.Options{Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
