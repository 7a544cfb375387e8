package store

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
	"time"

	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/pipec/pipec/runtime/clock"
)

// DefaultPath is where pipec keeps its state, relative to the working
// directory.
const DefaultPath = ".pipec/state.db"

// ScratchDir is the folder where the users of a state file keep what they
// write beside it: attempts' logs, staging and heartbeat files, and the
// default artifact store (versions/). A state named state.db (the default,
// .pipec/state.db) has its folder to itself and uses it; any other name
// gets <name>.d beside it, so two states in one folder never share their
// scratch (nor does one's pipec gc remove the other's versions).
func ScratchDir(statePath string) string {
	if filepath.Base(statePath) == filepath.Base(DefaultPath) {
		return filepath.Dir(statePath)
	}
	return statePath + ".d"
}

// Options tune an SQLite store; the zero value is the production setting.
type Options struct {
	// Clock is the store's clock for the times it records (created,
	// started, event times); nil means time.Now.
	Clock Clock
	// LeaseClock judges leases (attempts' and runs'): nil means
	// clock.Boottime, which never steps and names its boot. Tests that drive
	// leases by hand pass clock.Wall of their fake clock.
	LeaseClock clock.Lease
	// BusyTimeout is how long a write waits for another process's write lock
	// before failing; 0 means 30s.
	BusyTimeout time.Duration
}

// SQLite is the embedded Store: one SQLite database file in WAL mode.
//
// Each handle keeps one write connection, on which the handle's writes run
// with group commit (see write), and a small pool of read-only connections. Several handles and several processes may open the
// same file.
type SQLite struct {
	path        string
	clock       Clock
	lease       clock.Lease
	busyTimeout time.Duration

	w     *sql.DB    // one connection, used only by the batch leader
	r     *sql.DB    // read-only connections
	wlock *writeLock // queue in front of SQLite's write lock, see writelock_unix.go

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
}

var _ Store = (*SQLite)(nil)

// Open opens (creating if needed) the state database at path and migrates its
// schema. A new file is created with mode 0600 and a missing directory with
// 0700: the state names commands, paths and errors that are nobody else's
// business.
func Open(ctx context.Context, path string, opt Options) (*SQLite, error) {
	if path == "" {
		path = DefaultPath
	}
	if opt.Clock == nil {
		opt.Clock = time.Now
	}
	if opt.BusyTimeout <= 0 {
		opt.BusyTimeout = 30 * time.Second
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	// Create the file ourselves so its mode is 0600; SQLite gives the -wal and
	// -shm files the mode of the database file.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	f.Close()

	// The write connection has no SQLite busy handler: SQLite's sleeps 1, 2,
	// 5, 10... ms between tries, far longer than one of our transactions, so
	// several handles racing for the write lock would mostly sleep. write
	// retries BEGIN IMMEDIATE itself with short jittered pauses instead.
	q := url.Values{}
	q.Set("_busy_timeout", "0")
	q.Set("_synchronous", "NORMAL")
	q.Set("_foreign_keys", "1")
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
	s := &SQLite{path: path, clock: opt.Clock, lease: opt.LeaseClock, busyTimeout: opt.BusyTimeout, w: w, r: r, wlock: wl,
		wc: &writeConn{db: w}}
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
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return s, nil
}

// schemaCurrent reports, from a read, that the schema needs no migration, so
// opening an up-to-date database (pipec status, every run after the first)
// takes no write lock and no fsync. Anything else, including a newer schema,
// goes through migrate, which decides under the write lock.
func (s *SQLite) schemaCurrent(ctx context.Context) bool {
	var v int
	err := s.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v)
	return err == nil && v == SchemaVersion()
}

// Path is the database file.
func (s *SQLite) Path() string { return s.path }

// Close waits for the writes already queued, then closes the connections.
// Writes after Close fail with ErrClosed.
func (s *SQLite) Close() error {
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
func (s *SQLite) IntegrityCheck(ctx context.Context) error {
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
func (s *SQLite) now() int64 { return s.clock().UnixNano() }

// leaseUntil is the lease clock's reading lease from now (the boot, and 0
// for no lease).
func (s *SQLite) leaseUntil(lease time.Duration) (string, int64) {
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
func (s *SQLite) retryBusy(ctx context.Context, fn func() error) error {
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

// isBusy reports SQLITE_BUSY (any extended code): another connection holds
// the lock.
func isBusy(err error) bool {
	var se *sqlite.Error
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
