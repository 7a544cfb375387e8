package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/postgres"
)

// TestDomainsMigration: migration 19 moves the checks of the rows every
// task writes (its work row, its attempt, its token) from the tables to
// the columns' domains. A run in flight keeps its rows, and the values the
// tables' checks refused are still refused, with the same SQLSTATE.
func TestDomainsMigration(t *testing.T) {
	ctx := context.Background()
	url, conn := schemaAt(t, 18)
	if _, err := conn.Exec(ctx, `
INSERT INTO runs (id, pipeline, interval_key, seq, code_version, plan_digest, state, created)
	VALUES ('r1', 'p', 'i', 1, '1', 'sha256:x', 'running', now());
INSERT INTO work (run, task, state, waiting_on, dependents, limits, worker) VALUES
	('r1', 'a', 'claimed', 0, '["b"]', '{}', 'w1'),
	('r1', 'b', 'blocked', 1, '[]', '{}', '');
INSERT INTO tokens (resource, last) VALUES ('p@i', 7);
INSERT INTO attempts (run, task, number, resource, token, state) VALUES ('r1', 'a', 1, 'p@i', 7, 'running');`); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	a, err := s.GetAttempt(ctx, store.AttemptRef{Run: "r1", Task: "a", Number: 1})
	if err != nil || a.State != store.AttemptRunning || a.Token != 7 {
		t.Fatalf("the attempt after the migration: %+v, %v; want running with token 7", a, err)
	}
	var types, states string
	if err := conn.QueryRow(ctx, `SELECT
	(SELECT pg_typeof(state)::text FROM work LIMIT 1) || ' ' || (SELECT pg_typeof(state)::text || ' ' || pg_typeof(number)::text FROM attempts)
	|| ' ' || (SELECT pg_typeof(last)::text FROM tokens),
	(SELECT string_agg(task || '=' || state, ' ' ORDER BY task) FROM work)`).Scan(&types, &states); err != nil {
		t.Fatal(err)
	}
	if want := "pipec_work_state pipec_attempt_state pipec_positive_integer pipec_positive_bigint"; types != want {
		t.Errorf("the columns' types = %q, want %q", types, want)
	}
	if want := "a=claimed b=blocked"; states != want {
		t.Errorf("the work rows = %q, want %q", states, want)
	}

	for _, bad := range []string{
		`UPDATE work SET state = 'done' WHERE task = 'a'`,
		`INSERT INTO work (run, task, state, waiting_on, dependents, limits) VALUES ('r1', 'c', 'Ready', 0, '[]', '{}')`,
		`UPDATE attempts SET state = 'lost'`,
		`UPDATE attempts SET number = 0`,
		`UPDATE tokens SET last = 0`,
	} {
		_, err := conn.Exec(ctx, bad)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23514" {
			t.Errorf("%s: %v, want a check violation (23514)", bad, err)
		}
	}
}
