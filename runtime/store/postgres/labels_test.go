package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pipec/pipec/runtime/store/postgres"
)

// TestLabelsMigration: workers registered before migration 5 kept their
// labels comma-joined in text; the migration turns them into arrays, and
// tasks of runs submitted before it require none.
func TestLabelsMigration(t *testing.T) {
	ctx := context.Background()
	url, conn := schemaAt(t, 4)
	if _, err := conn.Exec(ctx, `INSERT INTO workers (name, host, pid, slots, labels, state, started, last_seen, expiry) VALUES
	('old', 'h', 1, 1, 'gpu,spark', 'live', now(), now(), now() + interval '1 hour'),
	('bare', 'h', 2, 1, '', 'live', now(), now(), now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ws, err := s.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, w := range ws {
		got[w.Name] = fmt.Sprintf("%q", w.Labels)
	}
	if want := map[string]string{"old": `["gpu" "spark"]`, "bare": "[]"}; got["old"] != want["old"] || got["bare"] != want["bare"] {
		t.Errorf("labels after the migration = %v, want %v", got, want)
	}
}

// schemaAt is a new schema migrated up to version, as an older pipec left
// it, and a connection to it (closed when t ends): a migration test writes
// the rows the migration must carry over, then opens the store.
func schemaAt(t *testing.T, version int) (string, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	url := pg.Server(t).NewSchema(t)
	if err := postgres.MigrateTo(ctx, url, version); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return url, conn
}
