package sqlite

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/pipec/pipec/runtime/clock"
	"github.com/pipec/pipec/runtime/store"
)

// The worker queue (queue.go) keeps its tables in the store's database
// (migration 7) and writes them in the store's own transactions: under its
// write lock and group commit, with its clocks, through what follows.

// queueTx is a write transaction of the store, as the worker queue uses it.
// Its statements run in the transaction (or, batched with other writes, in
// a savepoint of it, see write): fn of update must use only it and keep no
// state but its results; it runs once, or not at all when ctx is done
// before its turn.
type queueTx struct {
	s   *Store
	tx  *wtx
	now int64
}

// update runs fn in a write transaction of the store (BEGIN IMMEDIATE: it
// holds SQLite's write lock, so every update of every handle and process
// on the file runs one after another) committed with synchronous=NORMAL,
// and returns once it committed.
func (s *Store) update(ctx context.Context, fn func(context.Context, *queueTx) error) error {
	return s.write(ctx, normal, func(ctx context.Context, tx *wtx) error {
		return fn(ctx, &queueTx{s: s, tx: tx, now: s.now()})
	})
}

// updateGranting is update made with mode grants: fn may grant tokens
// (StartAttempt).
func (s *Store) updateGranting(ctx context.Context, fn func(context.Context, *queueTx) error) error {
	return s.write(ctx, grants, func(ctx context.Context, tx *wtx) error {
		return fn(ctx, &queueTx{s: s, tx: tx, now: s.now()})
	})
}

// updateDurable is update committed with synchronous=FULL: on stable
// storage when it returns (a write that records what Outcome.Ran.Durable
// asks to keep through a power cut).
func (s *Store) updateDurable(ctx context.Context, fn func(context.Context, *queueTx) error) error {
	return s.write(ctx, durable, func(ctx context.Context, tx *wtx) error {
		return fn(ctx, &queueTx{s: s, tx: tx, now: s.now()})
	})
}

// Exec runs a statement that returns no rows.
func (t *queueTx) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, query, args...)
}

// Query runs a query; the rows must be closed before the next statement.
func (t *queueTx) Query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, query, args...)
}

// QueryRow runs a query expected to return at most one row.
func (t *queueTx) QueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, query, args...)
}

// Now is the store's clock at the start of the transaction.
func (t *queueTx) Now() int64 { return t.now }

// LeaseUntil is the lease clock's reading lease from now.
func (t *queueTx) LeaseUntil(lease time.Duration) clock.Reading {
	boot, until := t.s.leaseUntil(lease)
	return clock.Reading{Boot: boot, Nanos: until}
}

// CreateRun is Store.CreateRun inside this transaction.
func (t *queueTx) CreateRun(ctx context.Context, nr store.NewRun) (store.Run, error) {
	return t.s.createRun(ctx, t.tx, nr)
}

// AppendEvent records an event in this transaction; payload is marshalled
// as JSON (sorted keys).
func (t *queueTx) AppendEvent(ctx context.Context, e store.Event, payload map[string]any) error {
	return appendEvent(ctx, t.tx, t.now, e, payload)
}

// StartAttempt is Store.StartAttempt inside this transaction, which must
// be an updateGranting one.
func (t *queueTx) StartAttempt(ctx context.Context, spec store.AttemptSpec) (store.Attempt, error) {
	var a store.Attempt
	err := t.s.startAttempt(ctx, t.tx, spec, &a)
	return a, err
}

// FinishAttempt is Store.FinishAttempt inside this transaction: the worker
// queue records a visit's last attempt's end with the visit's
// (queue.Result.End).
func (t *queueTx) FinishAttempt(ctx context.Context, ref store.AttemptRef, o store.Outcome) error {
	return t.s.finishAttempt(ctx, t.tx, ref, o)
}

// UnknownAttempts marks the task's unfinished (queued or running) attempts
// unknown in this transaction, in number order, each with an
// attempt.unknown event carrying payload(its token).
func (t *queueTx) UnknownAttempts(ctx context.Context, run, task string, payload func(token int64) map[string]any) error {
	rows, err := t.tx.QueryContext(ctx, `UPDATE attempts SET state = 'unknown', lease_expiry = 0, lease_boot = '', lease_until = 0
WHERE run = ? AND task = ? AND state IN ('queued', 'running') RETURNING number, token`, run, task)
	if err != nil {
		return err
	}
	type marked struct {
		n   int
		tok int64
	}
	var ms []marked
	for rows.Next() {
		var m marked
		if err := rows.Scan(&m.n, &m.tok); err != nil {
			rows.Close()
			return err
		}
		ms = append(ms, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	slices.SortFunc(ms, func(a, b marked) int { return a.n - b.n })
	for _, m := range ms {
		if err := t.AppendEvent(ctx, store.Event{Run: run, Kind: store.EventAttemptUnknown, Task: task, Attempt: m.n}, payload(m.tok)); err != nil {
			return err
		}
	}
	return nil
}
