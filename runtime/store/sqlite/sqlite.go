// Package sqlite is the embedded store.Store, and the workers' queue.Queue
// on it: one SQLite database file in WAL mode, shared by every pipec
// process on the machine that names it.
//
// # Durability
//
// The store runs SQLite in WAL mode. Two things
// must never be lost, not even to an OS crash or a power cut: a fencing token
// once granted (else the same token could be handed out twice, and a sink
// that saw the first holder's token would accept the second's writes as
// equal), and a pointer once swapped (else a reader who saw the new version
// could later see the old one again).
//
// Pointer swaps ([store.Store.CompareAndSwapPointer]) commit with PRAGMA
// synchronous=FULL: the WAL is fsynced before COMMIT returns, so the swap is
// on stable storage before the sink's link can show it.
//
// Token grants ([store.Store.NextToken], [store.Store.StartAttempt]) use a durable epoch
// folded into every token instead of an fsync per grant: a token is
// epoch*1e9 + n (epoch 3, 17th grant: 3000000017). Before a store handle
// grants its first token it records a new epoch, one higher than any before,
// with synchronous=FULL; later grants of that handle commit with NORMAL. A
// grant is max(last token of the resource + 1, epoch*1e9), so tokens strictly
// increase per resource across handles, processes and restarts. An OS crash
// may roll back the last NORMAL grants, and with them the counter; but every
// process dies with the OS, and any handle opened afterwards records a higher
// epoch before granting, so every token it hands out exceeds every token
// granted before the crash, lost or not. A handle never grants past its epoch's
// 1e9 tokens without durably recording a new epoch first. The cost is one
// fsync per store handle, not one per task attempt.
//
// Every other write commits with synchronous=NORMAL: atomic, and it survives a
// kill -9 of any process (the WAL is in the OS page cache), but the last
// commits may roll back after an OS crash or power loss. That is safe because
//
//   - the WAL is one append-only log and recovery keeps a prefix of it: after
//     a crash the database is exactly as it was at some earlier moment, never
//     a mix, and that moment is no earlier than the last FULL commit (its
//     fsync covers every frame before it). A pointer swap thus always keeps
//     the version record and the acceptance it depends on;
//   - what a crash can take back only returns the state to one a rerun
//     already handles: an attempt finished or marked unknown looks running
//     again and is fenced by the rerun's higher tokens; a lease renewal is
//     lost (shorter, never longer); a version or its acceptance is lost, and
//     the rerun produces and audits it again. The processes that acted on
//     the lost writes died with the OS, and what they left outside the store
//     (staged data, unpublished copies in a sink) is never visible.
//
// Each handle runs its writes with group commit: writes waiting at the same
// moment share one transaction (each in its own savepoint) and one fsync,
// FULL if any of them needs it. A write returns only after its own
// transaction committed, so batching changes throughput, never the guarantee.
// One publisher alone is bound by the disk's fsync latency; concurrent
// publishers in one process share fsyncs (see BenchmarkFencedPublish).
//
// # Concurrency
//
// A [Store] is safe for concurrent use by several goroutines. Several Store
// handles, in one process or in several processes, may share one database
// file: writes take SQLite's write lock up front (BEGIN IMMEDIATE) and retry
// for up to the busy timeout while another handle holds it; reads see a
// consistent snapshot and never block writers. Before BEGIN, writers queue
// on an flock of "<db>-lock", so a waiting process wakes the moment the
// writer before it is done instead of polling; SQLite's lock alone decides
// correctness.
//
// # Clock
//
// Times the store records come from Options.Clock; leases are judged on
// Options.LeaseClock (CLOCK_BOOTTIME with the boot id): a wall-clock step
// neither expires a live lease nor keeps a dead one live.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	msqlite "modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/pipec/pipec/internal/filekind"
	"github.com/pipec/pipec/runtime/clock"
	"github.com/pipec/pipec/runtime/store"
)

// Options tune an SQLite store; the zero value is the production setting.
type Options struct {
	// Clock is the store's clock for the times it records (created,
	// started, event times); nil means time.Now.
	Clock store.Clock
	// LeaseClock judges leases (attempts' and runs'): nil means
	// clock.Boottime, which never steps and names its boot. Tests that drive
	// leases by hand pass clock.Wall of their fake clock.
	LeaseClock clock.Lease
	// BusyTimeout is how long a write waits for another process's write lock
	// before failing; 0 means 30s.
	BusyTimeout time.Duration
}

// Store is the embedded store.Store: one SQLite database file in WAL mode.
//
// Each handle keeps one write connection, on which the handle's writes run
// with group commit (see write), and a small pool of read-only connections. Several handles and several processes may open the
// same file.
type Store struct {
	path        string
	clock       store.Clock
	lease       clock.Lease
	busyTimeout time.Duration

	w *sql.DB // one connection, used only by the batch leader
	r *sql.DB // read-only connections
	// reads are the read statements prepared once (reads.go).
	readsMu sync.Mutex
	reads   map[string]*sql.Stmt
	stateID atomic.Pointer[string] // StateID, once read
	wlock   *writeLock             // queue in front of SQLite's write lock, see writelock_unix.go

	// Token epoch (see the package doc); only the batch leader reads
	// or writes these. epoch is this handle's durably recorded epoch, 0 until
	// its first grant; txEpoch is the one in force in the batch being run.
	epoch, txEpoch int64

	// Group commit (commit.go): writes queue here and one of them at a time,
	// the leader, runs a batch on wc, the held write connection.
	cmu       sync.Mutex
	queue     []*writeReq
	leading   bool
	closed    bool
	idle      *sync.Cond // signalled when the last leader steps down
	wc        *writeConn
	closeOnce sync.Once
	// batches is where leaders hand their batch to the batch goroutine (see
	// lead); closed by Close.
	batches chan batchJob

	// poll is how soon after a commit the queue's Wakeups looks at the file
	// again (queue.go).
	poll time.Duration
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the state database at path and migrates its
// schema. A new file is created with mode 0600 and a missing directory with
// 0700: the state names commands, paths and errors that are nobody else's
// business.
func Open(ctx context.Context, path string, opt Options) (*Store, error) {
	if path == "" {
		path = store.DefaultPath
	}
	if opt.Clock == nil {
		opt.Clock = time.Now
	}
	if opt.BusyTimeout <= 0 {
		opt.BusyTimeout = 30 * time.Second
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", diskFull(err))
	}
	// Create the file ourselves so its mode is 0600; SQLite gives the -wal and
	// -shm files the mode of the database file.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state database: %w", diskFull(err))
	}
	fi, err := f.Stat()
	f.Close()
	if err == nil && !fi.Mode().IsRegular() {
		// SQLite would take a device for a full disk, and a pipe would
		// hang it: the state is a file of its own.
		return nil, fmt.Errorf("state database: %s is %s; the state must be a regular file", path, filekind.Of(fi.Mode().Type()))
	}

	// The write connection has no SQLite busy handler: SQLite's sleeps 1, 2,
	// 5, 10... ms between tries, far longer than one of our transactions, so
	// several handles racing for the write lock would mostly sleep. write
	// retries BEGIN IMMEDIATE itself with short jittered pauses instead.
	q := url.Values{}
	q.Set("_busy_timeout", "0")
	q.Set("_synchronous", "NORMAL")
	q.Set("_foreign_keys", "1")
	// A statement that may abort halfway (a foreign key, a trigger) keeps
	// the pages it changes in a statement journal, a temporary file by
	// default: a quarter of a run's pwrites, which only roll back that one
	// statement and have nothing to do with durability.
	q.Add("_pragma", "temp_store(MEMORY)")
	w, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	rq := url.Values{}
	rq.Set("_busy_timeout", fmt.Sprint(opt.BusyTimeout.Milliseconds()))
	rq.Set("_foreign_keys", "1")
	rq.Set("_query_only", "1")
	r, err := sql.Open("sqlite", path+"?"+rq.Encode())
	if err != nil {
		w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)

	wl, err := openWriteLock(path)
	if err != nil {
		w.Close()
		r.Close()
		return nil, err
	}
	if opt.LeaseClock == nil {
		opt.LeaseClock = clock.Boottime
	}
	s := &Store{path: path, clock: opt.Clock, lease: opt.LeaseClock, busyTimeout: opt.BusyTimeout, w: w, r: r, wlock: wl,
		wc: &writeConn{db: w}, poll: DefaultWakeupPoll}
	s.idle = sync.NewCond(&s.cmu)
	s.batches = make(chan batchJob)
	go s.batchLoop()
	err = s.retryBusy(ctx, func() error {
		var mode string
		if err := s.w.QueryRowContext(ctx, `PRAGMA journal_mode=WAL`).Scan(&mode); err != nil {
			return err
		}
		if mode != "wal" {
			return fmt.Errorf("journal_mode is %q, WAL is required", mode)
		}
		return nil
	})
	if err == nil && !s.schemaCurrent(ctx) {
		err = s.write(ctx, durable, migrate)
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("open %s: %w", path, diskFull(err))
	}
	return s, nil
}

// schemaCurrent reports, from a read, that the schema needs no migration, so
// opening an up-to-date database (pipec status, every run after the first)
// takes no write lock and no fsync. Anything else, including a newer schema,
// goes through migrate, which decides under the write lock.
func (s *Store) schemaCurrent(ctx context.Context) bool {
	var v int
	err := s.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v)
	return err == nil && v == SchemaVersion()
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close waits for the writes already queued, then closes the connections.
// Writes after Close fail with ErrClosed.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.cmu.Lock()
		s.closed = true
		for s.leading {
			s.idle.Wait()
		}
		s.cmu.Unlock()
		close(s.batches)
		s.wc.reset()
		err = errors.Join(s.w.Close(), s.r.Close(), s.wlock.close())
	})
	return err
}

// IntegrityCheck runs PRAGMA integrity_check and returns an error listing the
// problems, if any.
func (s *Store) IntegrityCheck(ctx context.Context) error {
	rows, err := s.r.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("integrity check: %q", problems)
	}
	return nil
}

// now is the store's clock in the unit the schema stores.
func (s *Store) now() int64 { return s.clock().UnixNano() }

// leaseUntil is the lease clock's reading lease from now (the boot, and 0
// for no lease).
func (s *Store) leaseUntil(lease time.Duration) (string, int64) {
	if lease <= 0 {
		return "", 0
	}
	r := s.lease()
	return r.Boot, r.Nanos + int64(lease)
}

// retryBusy runs fn until it does not fail with SQLITE_BUSY, pausing a
// jittered, doubling 20µs..500µs between tries, for at most the busy timeout.
// Only statements that take a lock before doing anything (BEGIN IMMEDIATE,
// the journal mode switch) go through it, so retrying cannot repeat work.
func (s *Store) retryBusy(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(s.busyTimeout)
	pause := 20 * time.Microsecond
	for {
		err := fn()
		if !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(pause/2 + rand.N(pause))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, 500*time.Microsecond)
	}
}

// diskFull marks err as store.ErrDiskFull (errors.Is) when it is the
// disk's refusal: SQLite's SQLITE_FULL, SQLITE_IOERR or SQLITE_READONLY
// result code (any extended code), or, before SQLite has the file, the
// system's ENOSPC, EDQUOT, EFBIG or EROFS. Any other err is returned as it
// is.
func diskFull(err error) error {
	if err == nil || errors.Is(err, store.ErrDiskFull) {
		return err
	}
	var se *msqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY:
			return fmt.Errorf("%w: %w", store.ErrDiskFull, err)
		}
		return err
	}
	for _, e := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG, syscall.EROFS} {
		if errors.Is(err, e) {
			return fmt.Errorf("%w: %w", store.ErrDiskFull, err)
		}
	}
	return err
}

// isBusy reports SQLITE_BUSY (any extended code): another connection holds
// the lock.
func isBusy(err error) bool {
	var se *msqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// timeOf converts a stored time back; 0 is the zero time.
func timeOf(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// nanos converts a time for storage; the zero time is 0.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
