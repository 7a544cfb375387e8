// Package postgres is the store.Store of pipec on PostgreSQL, for workers on
// several machines sharing one state (pipec --state postgres://…).
//
// # Durability
//
// Every method runs as one transaction committed before it returns, with
// synchronous_commit = on forced for the session (whatever the server's
// default), so a granted token or a swapped pointer is in the server's WAL
// on disk before the caller acts on it. PostgreSQL makes that cheap enough
// (one WAL flush per commit, shared between concurrent commits) that no
// epoch scheme as in the SQLite store is needed: a token grant is a single
// UPDATE … RETURNING of the resource's counter.
//
// # Concurrency
//
// Transactions run at READ COMMITTED. Each decision is made under a lock on
// what it decides about: the counter row for tokens (so concurrent grants,
// from any connection of any machine, are serialized and strictly
// increasing in commit order), the attempt's row (SELECT … FOR UPDATE) for
// its state changes, and a transaction-scoped advisory lock for things that
// may not exist yet (a pointer before its first publish, the next attempt
// number of a task). State changes are conditional where one statement
// suffices (MarkUnknown's UPDATE … WHERE lease_expiry <= now).
//
// # Clock
//
// Leases are judged by the database server's clock alone: every time the
// store writes or compares comes from the SQL function pipec_now(), which is
// clock_timestamp() of the server. Workers' clocks are never read, let alone
// compared. Tests may replace the clock (Options.Clock): the store then sets
// the transaction-local setting pipec.now, which pipec_now() prefers.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pipec/pipec/runtime/store"
)

// Options tune a PostgreSQL store; the zero value is the production setting.
type Options struct {
	// Clock replaces the server's clock, for tests only; nil means the
	// server's clock_timestamp().
	Clock store.Clock
	// MaxConns bounds the connection pool; 0 means 8.
	MaxConns int32
}

// Store is the PostgreSQL store.Store.
type Store struct {
	pool  *pgxpool.Pool
	clock store.Clock
}

var _ store.Store = (*Store)(nil)

// IsURL reports whether a --state value names a PostgreSQL database.
func IsURL(state string) bool {
	for _, p := range []string{"postgres://", "postgresql://"} {
		if len(state) >= len(p) && state[:len(p)] == p {
			return true
		}
	}
	return false
}

// Open connects to the database named by url (postgres://…; libpq keywords
// and PG* environment variables as pgx reads them), migrates its schema and
// returns the store. Errors never include the URL's password.
func Open(ctx context.Context, url string, opt Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's parse errors redact the password; say no more than that.
		return nil, fmt.Errorf("state URL: %w", err)
	}
	cfg.MaxConns = 8
	if opt.MaxConns > 0 {
		cfg.MaxConns = opt.MaxConns
	}
	rp := cfg.ConnConfig.RuntimeParams
	rp["synchronous_commit"] = "on"
	rp["application_name"] = "pipec"
	rp["TimeZone"] = "UTC"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to state database: %w", err)
	}
	s := &Store{pool: pool, clock: opt.Clock}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("state database %s: %w", redacted(cfg), err)
	}
	return s, nil
}

// redacted names the database without credentials: db@host.
func redacted(cfg *pgxpool.Config) string {
	return fmt.Sprintf("%s on %s", cfg.ConnConfig.Database, cfg.ConnConfig.Host)
}

// Close releases the connections.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Pool is the connection pool, for tests and tools that read the schema.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// tx runs fn in one READ COMMITTED transaction and commits it. Serialization
// failures and deadlocks (which PostgreSQL resolves by aborting one side)
// are retried: fn must be repeatable, keeping no state across calls other
// than its results.
func (s *Store) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	for try := 0; ; try++ {
		err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			if s.clock != nil {
				if _, err := tx.Exec(ctx, `SELECT set_config('pipec.now', $1, true)`, s.clock().UTC().Format(time.RFC3339Nano)); err != nil {
					return err
				}
			}
			return fn(tx)
		})
		if try < 20 && retryable(err) {
			continue
		}
		return err
	}
}

// retryable reports a transaction the server aborted only to break a
// conflict: serialization_failure or deadlock_detected.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// isUnique reports a unique_violation.
func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// lockKey takes a transaction-scoped advisory lock on a name, for decisions
// about rows that may not exist yet. Distinct names may share a hash; that
// only serializes them.
func lockKey(ctx context.Context, tx pgx.Tx, kind, name string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, kind+"\x1f"+name)
	return err
}

// timeOf converts a nullable timestamp; NULL is the zero time.
func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// changed turns an UPDATE's result into ErrConflict when it changed no row:
// its WHERE (the state it expected) no longer held.
func changed(tag pgconn.CommandTag, err error) error {
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("changed concurrently: %w", store.ErrConflict)
	}
	return nil
}

// queryer is what both the pool and a transaction offer.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
