package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ErrClosed: the store was closed.
var ErrClosed = errors.New("store closed")

// maxBatch bounds how many writes share one transaction.
const maxBatch = 128

// commitMode says how a write must be committed.
type commitMode int

const (
	// normal: synchronous=NORMAL, atomic, survives a process crash.
	normal commitMode = iota
	// grants: the write grants tokens; its batch records a new epoch with
	// synchronous=FULL first if this handle has none yet.
	grants
	// durable: synchronous=FULL, survives power loss once committed.
	durable
)

// writeReq is one write waiting to be committed.
type writeReq struct {
	ctx  context.Context
	mode commitMode
	fn   func(context.Context, *wtx) error
	done chan error    // the verdict; buffered
	lead chan struct{} // "run the next batch yourself"; buffered
}

// write runs fn in a write transaction and returns once that transaction
// committed (or failed), with the durability mode asks for (see the package
// doc for which writes need which). A write the disk refused is
// store.ErrDiskFull (diskFull).
//
// Group commit, leader style: a write that finds no batch running runs one
// itself, on its own goroutine; writes that arrive meanwhile queue, and when
// the batch ends the oldest of them leads the next batch, which takes every
// write then queued (up to maxBatch). Each write of a batch runs in its own
// SAVEPOINT, so one write's error undoes only that write, and the batch
// commits once, FULL if any of its writes needs it. Concurrent publishers on
// one handle thus share one WAL fsync, while a write still returns only after
// its own data is committed with the durability it asked for; a lone write
// pays exactly one transaction and no hand-over between goroutines.
//
// fn must only use tx and must not keep state across calls other than its
// results; it runs once, or not at all when ctx is done before its turn. Its
// statements run with ctx's values but not its cancellation: interrupting one
// statement would roll back the whole shared transaction.
func (s *Store) write(ctx context.Context, mode commitMode, fn func(context.Context, *wtx) error) error {
	for {
		err := s.submit(ctx, mode, fn)
		if !errors.Is(err, errEpochSpent) {
			return diskFull(err)
		}
		// The spent epoch was dropped; the retry's batch records a new one
		// durably.
	}
}

func (s *Store) submit(ctx context.Context, mode commitMode, fn func(context.Context, *wtx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	req := &writeReq{ctx: ctx, mode: mode, fn: fn, done: make(chan error, 1), lead: make(chan struct{}, 1)}
	s.cmu.Lock()
	if s.closed {
		s.cmu.Unlock()
		return ErrClosed
	}
	s.queue = append(s.queue, req)
	if s.leading {
		s.cmu.Unlock()
		// Once queued the write will be decided; wait for the verdict even
		// if ctx ends, so the caller never returns while fn may still run.
		select {
		case err := <-req.done:
			return err
		case <-req.lead:
		}
	} else {
		s.leading = true
		s.cmu.Unlock()
	}
	s.lead()
	return <-req.done
}

// lead runs one batch, the leader's own write first, then hands the lead to
// the oldest write still queued, or steps down when none is.
func (s *Store) lead() {
	s.cmu.Lock()
	n := min(len(s.queue), maxBatch)
	batch := s.queue[:n:n]
	s.queue = s.queue[n:]
	s.cmu.Unlock()

	defer s.handOff()
	job := batchJob{batch: batch, done: make(chan any, 1)}
	s.batches <- job
	if p := <-job.done; p != nil {
		panic(p)
	}
}

// batchJob is one batch for the batch goroutine; done receives nil, or the
// panic value of a write that panicked.
type batchJob struct {
	batch []*writeReq
	done  chan any
}

// batchLoop runs every batch of the handle on one long-lived goroutine.
// SQLite (transpiled to Go) needs a deep stack; run on each caller's fresh,
// small goroutine, every write paid for growing and copying its stack (7% of
// a 1,000-task run's profile). One goroutine grows it once. The hand-over is
// a channel send per batch, not per write.
func (s *Store) batchLoop() {
	for job := range s.batches {
		job.done <- s.runJob(job)
	}
}

func (s *Store) runJob(job batchJob) (p any) {
	defer func() { p = recover() }()
	s.commitBatch(s.wc, job.batch)
	return nil
}

// handOff passes the lead to the oldest queued write, or steps down. It runs
// deferred, so even a panicking batch leaves the handle usable.
func (s *Store) handOff() {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if len(s.queue) > 0 {
		s.queue[0].lead <- struct{}{}
		return
	}
	s.leading = false
	s.idle.Broadcast()
}

// commitBatch runs a batch in one transaction and answers every request.
func (s *Store) commitBatch(wc *writeConn, batch []*writeReq) {
	defer func() {
		if p := recover(); p != nil {
			// A bug in a write: fail the whole batch, drop the connection
			// (and its open transaction), and let the panic go on.
			wc.reset()
			for _, r := range batch {
				r.done <- fmt.Errorf("store: a write of this batch panicked: %v", p)
			}
			panic(p)
		}
	}()
	results := make([]error, len(batch))
	err := s.runBatch(wc, batch, results)
	if err != nil {
		// The connection may be broken or mid-transaction: start afresh.
		wc.reset()
	}
	for i, r := range batch {
		if err != nil && results[i] == nil {
			results[i] = err
		}
		r.done <- results[i]
	}
}

// runBatch returns an error that fails every write of the batch (BEGIN or
// COMMIT failed); results holds each write's own error.
func (s *Store) runBatch(wc *writeConn, batch []*writeReq, results []error) error {
	ctx := context.Background()
	full, granting := false, false
	live := 0
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		live++
		full = full || r.mode == durable
		granting = granting || r.mode == grants
	}
	if live == 0 {
		return nil
	}
	newEpoch := granting && s.epoch == 0
	full = full || newEpoch
	tx, err := wc.open(ctx)
	if err != nil {
		return err
	}
	if full {
		if _, err := tx.ExecContext(ctx, `PRAGMA synchronous=FULL`); err != nil {
			return fmt.Errorf("synchronous=FULL: %w", err)
		}
		// The error is ignored on purpose: the batch's outcome is decided by
		// then, and a connection left at FULL is only slower, never less safe.
		defer tx.ExecContext(ctx, `PRAGMA synchronous=NORMAL`)
	}
	if err := s.wlock.lock(s.busyTimeout); err != nil {
		return err
	}
	defer s.wlock.unlock()
	if err := s.retryBusy(ctx, func() error {
		_, err := tx.ExecContext(ctx, `BEGIN IMMEDIATE`)
		return err
	}); err != nil {
		return err
	}
	rollback := func() { tx.ExecContext(ctx, `ROLLBACK`) }
	s.txEpoch = s.epoch
	defer func() {
		s.txEpoch = 0
		for _, err := range results {
			if errors.Is(err, errEpochSpent) {
				s.epoch = 0 // the next grant records a new epoch
			}
		}
	}()
	if newEpoch {
		// Outside any savepoint: the epoch must commit with the batch even if
		// one write of it fails.
		if err := tx.QueryRowContext(ctx, `UPDATE epochs SET epoch = epoch + 1 RETURNING epoch`).Scan(&s.txEpoch); err != nil {
			rollback()
			return fmt.Errorf("new token epoch: %w", err)
		}
	}
	for i, r := range batch {
		if results[i] != nil {
			continue
		}
		if len(batch) == 1 {
			// Alone: the transaction is the savepoint.
			if results[i] = r.fn(context.WithoutCancel(r.ctx), tx); results[i] != nil {
				rollback()
				return nil
			}
			continue
		}
		if _, err := tx.ExecContext(ctx, `SAVEPOINT write`); err != nil {
			rollback()
			return err
		}
		if results[i] = r.fn(context.WithoutCancel(r.ctx), tx); results[i] != nil {
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO write`); err != nil {
				rollback()
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `RELEASE write`); err != nil {
			rollback()
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `COMMIT`); err != nil {
		rollback()
		return fmt.Errorf("commit: %w", err)
	}
	s.epoch = s.txEpoch
	return nil
}

// writeConn is the write connection and the statements prepared on it.
// SQLite spends a good part of a small write parsing its SQL; every write
// statement of the store is a constant string, so each is prepared once.
type writeConn struct {
	db    *sql.DB
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
}

// open returns the transaction handle on the held connection, taking one
// from the pool first if needed.
func (wc *writeConn) open(ctx context.Context) (*wtx, error) {
	if wc.conn == nil {
		c, err := wc.db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		wc.conn, wc.stmts = c, map[string]*sql.Stmt{}
	}
	return &wtx{wc: wc}, nil
}

// reset closes the statements and gives the connection back to the pool
// (the next batch takes it again), first rolling back any transaction a
// failed batch left open; without one, ROLLBACK fails harmlessly.
func (wc *writeConn) reset() {
	if wc.conn == nil {
		return
	}
	wc.conn.ExecContext(context.Background(), `ROLLBACK`)
	for _, st := range wc.stmts {
		st.Close()
	}
	wc.conn.Close()
	wc.conn, wc.stmts = nil, nil
}

// wtx runs a write's statements in the batch's open transaction. Its
// methods mirror *sql.Tx's.
type wtx struct {
	wc *writeConn
}

func (t *wtx) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := t.wc.stmts[query]; ok {
		return st, nil
	}
	st, err := t.wc.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	t.wc.stmts[query] = st
	return st, nil
}

// ExecContext runs a statement that returns no rows.
func (t *wtx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// QueryContext runs a query.
func (t *wtx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// script runs SQL text of several statements (a migration), unprepared.
func (t *wtx) script(ctx context.Context, text string) error {
	_, err := t.wc.conn.ExecContext(ctx, text)
	return err
}

// QueryRowContext runs a query expected to return at most one row.
func (t *wtx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := t.stmt(ctx, query)
	if err != nil {
		// Unprepared, so the Row carries the same error.
		return t.wc.conn.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}
