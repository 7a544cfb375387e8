package postgres_test

import (
	"context"
	"testing"

	"github.com/pipec/pipec/runtime/queue/queuetest"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/postgres"
)

// TestQueueConformance runs the queue's contract against a real PostgreSQL
// server, each check on its own schema; every handle of a check has its
// own connection pool, as workers on several machines do.
func TestQueueConformance(t *testing.T) {
	srv := pg.Server(t)
	queuetest.Run(t, func(t *testing.T, clock store.Clock) func(*testing.T) queuetest.Handle {
		url := srv.NewSchema(t)
		return func(t *testing.T) queuetest.Handle {
			s, err := postgres.Open(context.Background(), url, postgres.Options{Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return queuetest.Handle{Store: s, Queue: s}
		}
	})
}
