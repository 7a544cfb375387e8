package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// MigrateTo applies the schema's migrations up to version only, on the
// database at url, so a test can write data as an older pipec did and see a
// later migration carry it over.
func MigrateTo(ctx context.Context, url string, version int) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TABLE schema_version (version integer PRIMARY KEY, name text NOT NULL)`); err != nil {
			return err
		}
		for _, m := range migrations {
			if m.version > version {
				break
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %d: %w", m.version, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return err
			}
		}
		return nil
	})
}

// MigrationSQL is the statement of the named migration, for tests that play
// one step on data written as before it.
func MigrationSQL(name string) string {
	for _, m := range migrations {
		if m.name == name {
			return m.sql
		}
	}
	return ""
}

// CandidatesSQL is the statement with which a claim reads its first page of
// candidates ($1 the page's size, $2 the worker).
func CandidatesSQL() string { return candidatesSQL(false) }

// RunEndSQL is the statement that ends a run ($1) with none of its tasks
// left to do: $2 its state when none failed, $3 when one did, $4 its
// event's kind.
func RunEndSQL() string { return runEndSQL }

// StepSQL is the DAG's step after a visit's end that wrote nothing else: $1
// run, $2 task, $3 worker, $4 the task's state, $5 and $6 its event's kind
// and payload, $7 whether the wakeup for dependents made ready is left to a
// claim that follows. Its first write finds the claimed row as every
// visit's end does.
func StepSQL() string { return stepSQL }

// JSONStringSQL is jsonStringSQL: text expression x as a JSON string,
// quoted as encoding/json quotes it.
func JSONStringSQL(x string) string { return jsonStringSQL(x) }

// PipelinedCommitSetting is synchronous_commit as a pipelined transaction
// sees it: one of a durable txRepeatable when durable, else of txPipelined.
func (s *Store) PipelinedCommitSetting(ctx context.Context, durable bool) (string, error) {
	var got string
	err := s.pipelined(ctx, durable, func(tx pgx.Tx, ends *txEnds) error {
		b := &pgx.Batch{}
		b.Queue(`SELECT current_setting('synchronous_commit')`)
		br, err := sendSkipping(ctx, tx, ends, b, 0)
		defer br.Close()
		if err != nil {
			return err
		}
		return br.QueryRow().Scan(&got)
	})
	return got, err
}
