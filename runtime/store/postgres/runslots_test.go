package postgres_test

import (
	"context"
	"testing"

	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/postgres"
	"github.com/pipec/pipec/runtime/store/storetest"
)

// TestRunSlots runs the max_active_runs checks against a real PostgreSQL
// server, each check on its own schema; every handle has its own
// connection pool, as processes on several machines do.
func TestRunSlots(t *testing.T) {
	srv := pg.Server(t)
	storetest.RunSlots(t, func(t *testing.T, clock store.Clock) func(*testing.T) storetest.Handle {
		url := srv.NewSchema(t)
		return func(t *testing.T) storetest.Handle {
			s, err := postgres.Open(context.Background(), url, postgres.Options{Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return storetest.Handle{Store: s, Queue: s}
		}
	})
}
