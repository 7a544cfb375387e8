// Package postgres is the store.Store of pipec on PostgreSQL, for workers on
// several machines sharing one state (pipec --state postgres://…).
//
// # Durability
//
// Every method runs as one transaction committed before it returns. Three
// things must never be lost, not even to a crash of the server or its
// machine: a pointer swap (else a reader who saw a version could later see
// the older one again), the uniqueness of a token (else two attempts
// could hold the same token, and a sink that saw one would take the other's
// writes as equal), and the start of a task that is not idempotent (else
// the next run, finding none, would charge again). Pointer swaps, raised
// token floors and those starts (store.Running.Durable) commit with
// synchronous_commit = on: on the server's disk before the caller acts.
// So does a version's acceptance, which the version's publishes follow at
// once: a crash that took it back made them find no accepted version, and
// fail the task as a publish's failure. (A crash between a version's
// record and its acceptance is the runtime's to ride: the acceptance finds
// no version, and the version is recorded again.) So do a run's creation
// (CreateRun, Submit), which the user was told of, and its end (FinishRun,
// CancelRun): a Temporal workflow ends its run once, and a crash that took
// that end back left the run running for good, its lease renewed by the
// workers that had visited it. Each is one flush a run.
//
// Token grants use a durable epoch instead of a flush per grant, as the
// SQLite store does: a token is epoch*1e9 + n. Before a store handle grants
// its first token it records a new epoch, one higher than any before, with a
// synchronous commit, and marks it in an unlogged table; its grants then
// commit asynchronously. A grant is max(last token of the resource + 1,
// epoch*1e9), taken under the resource row's lock, so tokens strictly
// increase per resource in commit order, across handles and machines. Only a
// crash of the server can take back asynchronous commits, and crash recovery
// empties every unlogged table: a handle whose epoch is no longer marked
// records a new, higher epoch before granting again, so every token granted
// after a crash exceeds every token granted before it, lost or not. (A
// worker that acted on a grant the crash took back holds a token nobody else
// will ever get.) A handle never grants past its epoch's 1e9 tokens without
// recording a new one. The cost: one flush per handle and per server crash,
// not one per attempt, and a grant holds its row lock for no flush.
//
// Every other write commits with synchronous_commit = off, PostgreSQL's
// asynchronous commit: atomic and at once visible to every session, but a
// server crash may take back the last few hundred milliseconds of them.
// That is safe for the same reasons as the SQLite store's NORMAL commits
// (see package runtime/store/sqlite): recovery keeps a prefix of the WAL, including every
// synchronous commit, and what it took back returns the state to one the
// runtime handles — an attempt finished looks running and is fenced by a
// successor's higher token, a claim lost is claimed again, a finished task
// runs again under a new token.
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
	"io"
	"net"
	"strings"
	"sync"
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
	// MaxConns bounds the connection pool, over the URL's pool_max_conns;
	// 0 means the URL's, else DefaultMaxConns.
	MaxConns int32
	// IdleInTransaction is how long the server lets a session of this
	// store sit idle inside a transaction before it ends the session (and
	// its locks); 0 means DefaultIdleInTransaction. A worker stopped with
	// SIGSTOP in the middle of a transaction would otherwise hold its row
	// locks (a run's submission, an interval's token counter) until it is
	// resumed, and every other worker would wait behind it.
	IdleInTransaction time.Duration
	// WaitForServer is how long a transaction waits for a server that
	// refuses connections (it is restarting) before it fails: a local
	// run's writes then ride out a restart instead of failing the task
	// they record. 0: it fails at once (a worker rides outages in its
	// own loop, each call bounded by its lease; its visits' calls carry
	// their own wait, store.WaitingForServer).
	WaitForServer time.Duration
}

// DefaultConnectTimeout bounds a connection attempt (its start-up and
// authentication included) when the URL sets no connect_timeout.
const DefaultConnectTimeout = 10 * time.Second

// DefaultIdleInTransaction bounds how long a stopped client can hold locks.
// The store's transactions take milliseconds; a client that is silent this
// long inside one is stopped or cut off.
const DefaultIdleInTransaction = 5 * time.Second

// Store is the PostgreSQL store.Store.
type Store struct {
	pool    *pgxpool.Pool
	clock   store.Clock
	waitFor time.Duration // Options.WaitForServer

	// epoch is this handle's durably recorded token epoch, 0 until its
	// first grant (see the package doc); epochMu guards it.
	epochMu sync.Mutex
	epoch   int64

	// stateID is the store's identity once read (it never changes, see
	// store.Store.StateID): a visit's sinks ask for it at every publish.
	stateMu sync.Mutex
	stateID string
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
		return nil, fmt.Errorf("connection string: %w", err)
	}
	if err := poolSize(url, cfg); err != nil {
		return nil, err
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// A server that accepts and never answers (hung, or behind a
		// network that drops packets) would hold a connection attempt,
		// and its slot in the pool, for ever; connect_timeout in the URL
		// wins.
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if opt.MaxConns > 0 {
		cfg.MaxConns = opt.MaxConns
	}
	rp := cfg.ConnConfig.RuntimeParams
	rp["synchronous_commit"] = "off" // durable transactions set it on (txDurable)
	rp["application_name"] = "pipec"
	// Each statement is prepared once a connection (pgx's statement cache),
	// and no parameter decides its plan (partial indexes name their states
	// as literals): planning it again at each execution, as the default
	// does while a custom plan looks cheaper, was a tenth of the server's
	// statement time on the workers' benchmark.
	rp["plan_cache_mode"] = "force_generic_plan"
	rp["TimeZone"] = "UTC"
	idle := opt.IdleInTransaction
	if idle <= 0 {
		idle = DefaultIdleInTransaction
	}
	rp["idle_in_transaction_session_timeout"] = fmt.Sprint(idle.Milliseconds())
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to state database: %w", err)
	}
	s := &Store{pool: pool, clock: opt.Clock, waitFor: opt.WaitForServer}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		if ce := (*pgconn.ConnectError)(nil); errors.As(err, &ce) && !connectRefused(err) {
			return nil, fmt.Errorf("state database %s: %w: %w", redacted(cfg), store.ErrUnreachable, err)
		}
		return nil, fmt.Errorf("state database %s: %w", redacted(cfg), diskFull(err))
	}
	return s, nil
}

// DefaultMaxConns is a store's pool size when its URL sets no
// pool_max_conns: a worker's slots, its heartbeat, its claims and the
// connection it listens for work on share it.
const DefaultMaxConns = 8

// MinConns is the least pool_max_conns a URL may set: a worker or pipec
// submit --wait holds one connection for as long as it listens for
// wakeups, and needs another for everything else.
const MinConns = 2

// poolSize sets cfg's pool size: the URL's pool_max_conns (pgx's own
// parameter; an operator fitting many workers into a server's
// max_connections sets it), else DefaultMaxConns. A size below MinConns is
// refused: the worker would wait for ever for a connection its own
// listener holds.
func poolSize(url string, cfg *pgxpool.Config) error {
	cc, err := pgconn.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("connection string: %w", err)
	}
	if _, set := cc.RuntimeParams["pool_max_conns"]; !set {
		cfg.MaxConns = DefaultMaxConns
		return nil
	}
	if cfg.MaxConns < MinConns {
		return fmt.Errorf("connection string: pool_max_conns=%d is below %d: pipec holds one connection to listen for wakeups and needs another for its writes", cfg.MaxConns, MinConns)
	}
	return nil
}

// redacted names the database without credentials: db@host.
func redacted(cfg *pgxpool.Config) string {
	return fmt.Sprintf("%s on %s", cfg.ConnConfig.Database, cfg.ConnConfig.Host)
}

// Close releases the connections. Closing one tells its server first, and
// pgx gives a server that does not answer (frozen, or behind a network
// that drops packets) 15 seconds per connection for that: Close returns
// after closeWithin and leaves the rest to the pool, so a pipec whose state
// stopped answering still exits.
func (s *Store) Close() error {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		s.pool.Close()
	}()
	select {
	case <-closed:
	case <-time.After(closeWithin):
	}
	return nil
}

// closeWithin bounds Store.Close.
const closeWithin = 2 * time.Second

// read is the pool for reads outside a transaction (reads).
func (s *Store) read() reads { return reads{s} }

// Pool is the connection pool, for tests and tools that read the schema.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// tx runs fn in one READ COMMITTED transaction and commits it
// asynchronously (see the package doc). Serialization failures and
// deadlocks (which PostgreSQL resolves by aborting one side) are retried: fn
// must be repeatable, keeping no state across calls other than its results.
func (s *Store) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.run(ctx, false, fn)
}

// txDurable is tx with a synchronous commit: the commit is on the server's
// disk when it returns. For token grants, pointer swaps, raised floors and
// runs' creations and ends.
func (s *Store) txDurable(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.run(ctx, true, fn)
}

// run is txDurable when durable, else tx.
func (s *Store) run(ctx context.Context, durable bool, fn func(pgx.Tx) error) error {
	return s.retrying(ctx, s.runOnce(ctx, durable, fn))
}

// runRepeatable is run for a transaction that is repeatable (its second
// run, once the first committed, changes nothing: an attempt's end, its
// process recorded): run again also when whether its COMMIT ran is not
// known, as a restart that ends the session under the COMMIT leaves it.
func (s *Store) runRepeatable(ctx context.Context, durable bool, fn func(pgx.Tx) error) error {
	return s.retrying(ctx, repeatable(ctx, s.runOnce(ctx, durable, fn)))
}

// runOnce is one try of run.
func (s *Store) runOnce(ctx context.Context, durable bool, fn func(pgx.Tx) error) func() error {
	return func() error {
		// The commit mode rides on BEGIN (one round trip, simple protocol).
		opts := pgx.TxOptions{BeginQuery: "BEGIN ISOLATION LEVEL READ COMMITTED"}
		if durable {
			opts.BeginQuery += "; SET LOCAL synchronous_commit = on"
		}
		tx, err := s.pool.BeginTx(ctx, opts)
		if err != nil {
			return safeAgain{err} // nothing was asked of the server but to begin
		}
		if s.clock != nil {
			_, err = tx.Exec(ctx, `SELECT set_config('pipec.now', $1, true)`, s.clock().UTC().Format(time.RFC3339Nano))
		}
		if err == nil {
			err = fn(tx)
		}
		if err != nil {
			_ = tx.Rollback(ctx) // pgx closes a connection it cannot roll back on
			return safeAgain{err}
		}
		return tx.Commit(ctx)
	}
}

// safeAgain is the failure of a transaction (or a read) that may run
// again: it failed before its COMMIT ran, so nothing of it committed (a
// session that ends aborts its transaction), or it is repeatable. One that
// failed because the server could not be reached (a restart that ended
// the session under a statement, SQLSTATE 57P01) is run again (again).
type safeAgain struct{ err error }

func (e safeAgain) Error() string { return e.err.Error() }
func (e safeAgain) Unwrap() error { return e.err }

// repeatable is once, a transaction or a read whose second run, once the
// first committed, changes nothing and answers as the first would have
// (a read; a version's record, found by its unique key; a final verdict;
// a swap that finds the pointer it made, Idempotent), marked safe to run
// again when the server could not be reached, whether or not its COMMIT
// ran: a restart can end a session between the COMMIT and its answer.
func repeatable(ctx context.Context, once func() error) func() error {
	return func() error {
		err := once()
		if err != nil && ctx.Err() == nil && errors.Is(unreachable(err), store.ErrUnreachable) {
			return safeAgain{err}
		}
		return err
	}
}

// settled runs write, a transaction that is not repeatable (made twice,
// it makes two of what it makes), and settles what a session ended under
// its COMMIT leaves unknown (a restart, SQLSTATE 57P01): whether it
// committed. made says that write's statements ran and returned what it
// makes (a row's key, read before the COMMIT); there reads whether that is
// in the database now. There, write committed and stands; not there,
// nothing of it committed, and it runs again (at most three times more).
// Anything else is write's error as it was.
func settled[T any](ctx context.Context, write func() (got T, made bool, err error), there func(T) (bool, error)) (T, error) {
	for try := 0; ; try++ {
		got, made, err := write()
		if err == nil || !made || try >= 3 || ctx.Err() != nil || !errors.Is(err, store.ErrUnreachable) {
			return got, err
		}
		ok, terr := there(got)
		switch {
		case terr != nil:
			return got, err
		case ok:
			return got, nil
		}
	}
}

// retrying runs a transaction (once, one try of it) until it commits or
// fails for good: tried again at once when again says so (at most 20
// times), or after a moment while waitForServer waits.
func (s *Store) retrying(ctx context.Context, once func() error) error {
	var refused time.Time
	for try := 0; ; {
		err := once()
		switch {
		case try < 20 && again(ctx, err):
			try++
		case s.waitForServer(ctx, err, &refused):
		default:
			return unreachable(diskFull(err))
		}
	}
}

// unreachable marks err as store.ErrUnreachable (errors.Is) when it says
// that the server could not be reached or went away under the transaction
// (a restart, a network cut, a caller's bound that ran out on a silent
// server), not that it refused what was asked: a connection that failed
// or broke, the server shutting down (SQLSTATE class 08, 57P01-57P03).
func unreachable(err error) error {
	if err == nil || errors.Is(err, store.ErrUnreachable) {
		return err
	}
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &pe):
		if !serverGoing(pe.Code) {
			return err
		}
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, context.DeadlineExceeded), pgconn.SafeToRetry(err):
	default:
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrUnreachable, err)
}

// again says whether a transaction that failed with err is run again:
// the server aborted it only to break a conflict (retryable), it asked to
// (errRetry), it failed before anything of it was sent (a pooled
// connection the server closed since its last use, as every one is after
// a restart: pgconn.SafeToRetry), or the server could not be reached
// before its COMMIT ran, or it is repeatable (safeAgain): nothing of it
// can have committed, or committing it twice is once,
// and the next try takes another connection. A connection that could not
// be made is waitForServer's to wait for. A failure once the COMMIT was
// sent, and not known to be skipped (tx's own, or one a pipelined
// transaction's batch carried, unless the server answered a statement
// before it with an error), is not tried again: whether it committed is
// unknown, and the caller's guards, not a blind retry, decide what
// follows.
func again(ctx context.Context, err error) bool {
	var safe safeAgain
	var refused *pgconn.ConnectError // waitForServer's to pace and bound
	return retryable(err) || errors.Is(err, errRetry) ||
		(ctx.Err() == nil && !errors.As(err, &refused) &&
			(pgconn.SafeToRetry(err) || errors.As(err, &safe) && errors.Is(unreachable(err), store.ErrUnreachable)))
}

// waitForServer waits a moment when err says that the server refused a
// connection (it is restarting, or not up yet), and says whether to run
// the transaction again: for Options.WaitForServer from the first refusal
// (refused, set here), or the wait ctx carries (store.WaitingForServer),
// and while ctx lasts. Nothing of a transaction that could not connect
// was sent.
func (s *Store) waitForServer(ctx context.Context, err error, refused *time.Time) bool {
	var ce *pgconn.ConnectError
	wait := store.ServerWait(ctx, s.waitFor)
	if wait <= 0 || !errors.As(err, &ce) || connectRefused(err) {
		return false
	}
	if refused.IsZero() {
		*refused = time.Now()
	}
	if time.Since(*refused) >= wait {
		return false
	}
	t := time.NewTimer(serverPoll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// connectRefused reports a connection the server refused for a reason no
// restart ends: it answered, with an error other than starting up or
// shutting down (SQLSTATE 57P01-57P03), a connection failure (class 08) or
// no resources left (class 53, too many connections among them): the
// database or the role does not exist, a wrong password, a startup
// parameter a connection pooler does not take. Said at once, not waited
// for as a server that is restarting.
func connectRefused(err error) bool {
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	if !errors.As(err, &ce) || !errors.As(err, &pe) {
		return false
	}
	return !serverGoing(pe.Code) && !strings.HasPrefix(pe.Code, "53")
}

// serverGoing reports a SQLSTATE that says the connection failed or the
// server is starting up or shutting down (class 08, 57P01-57P03): gone for
// a moment, not refusing.
func serverGoing(code string) bool {
	return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03"
}

// serverPoll is how often a transaction waiting for the server
// (waitForServer) tries to connect.
const serverPoll = 100 * time.Millisecond

// errRetry asks run to run the transaction again: it lost a race that a
// fresh snapshot resolves (two starts of one task taking the same number).
var errRetry = errors.New("retry the transaction")

// retryable reports a transaction the server aborted only to break a
// conflict: serialization_failure or deadlock_detected.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// diskFull marks err as store.ErrDiskFull (errors.Is) when the server
// reported SQLSTATE 53100, disk_full; any other err is returned as it is.
func diskFull(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "53100" && !errors.Is(err, store.ErrDiskFull) {
		return fmt.Errorf("%w: %w", store.ErrDiskFull, err)
	}
	return err
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
	_, err := tx.Exec(ctx, lockKeySQL, lockName(kind, name))
	return err
}

// queueLockKey is lockKey queued on a batch, for a transaction that sends
// its first reads with the lock.
func queueLockKey(b *pgx.Batch, kind, name string) { b.Queue(lockKeySQL, lockName(kind, name)) }

// lockName is the text an advisory lock on kind's name hashes.
func lockName(kind, name string) string { return kind + "\x1f" + name }

// lockKeySQL is lockKey's statement, $1 the lock's name (lockName).
const lockKeySQL = `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`

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

// reads is the pool for reads outside a transaction, their errors marked
// as the state's reach where they are (unreachable), as a transaction's
// are: a visit that could not read the state hands its task back as one
// that could not write it does. A read that failed before its first row
// because the server could not be reached (a pooled connection that a
// restart closed, a session ended under it) is sent again, on another
// connection, and waits for a server that refuses connections as a
// transaction does (reading): a read changes nothing, and the caller has
// seen nothing of it yet.
type reads struct{ s *Store }

func (r reads) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	var rows *readRows
	err := r.s.reading(ctx, func() error {
		inner, err := r.s.pool.Query(ctx, sql, args...)
		rows = &readRows{Rows: inner} // pgx's rows close safely after an error
		if err != nil {
			return err
		}
		// pgx reports a failure to send, or a session ended before the
		// first row, at the first Next: take it here, and keep the row.
		if rows.held = inner.Next(); !rows.held {
			return inner.Err()
		}
		return nil
	})
	if err != nil {
		return rows, unreachable(err)
	}
	return rows, nil
}

func (r reads) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return readRow{func(dest ...any) error {
		return r.s.reading(ctx, func() error { return r.s.pool.QueryRow(ctx, sql, args...).Scan(dest...) })
	}}
}

// reading runs once, a read, again while it failed because the server
// could not be reached and ctx lasts (retrying, which also waits for a
// server that refuses connections).
func (s *Store) reading(ctx context.Context, once func() error) error {
	return unreachable(s.retrying(ctx, repeatable(ctx, once)))
}

type readRow struct{ scan func(dest ...any) error }

func (r readRow) Scan(dest ...any) error { return r.scan(dest...) }

// readRows are a read's rows, the first of them already taken (held) by
// Next when there is one.
type readRows struct {
	pgx.Rows
	held bool
}

func (r *readRows) Next() bool {
	if r.held {
		r.held = false
		return true
	}
	return r.Rows.Next()
}

func (r *readRows) Scan(dest ...any) error { return unreachable(r.Rows.Scan(dest...)) }
func (r *readRows) Err() error             { return unreachable(r.Rows.Err()) }

// queryer is what both the pool and a transaction offer.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// txPipelined is tx for the workers' hot transactions (a claim, a visit's
// end): the BEGIN (and a test clock) is not a round trip of its own but
// rides at the head of fn's first batch, which fn hands to ends.first
// before sending it; and fn may have the COMMIT ride at the tail of its
// last batch (ends.last), reading its result with ends.committed, when it
// knows it will send nothing after. Committed as tx commits
// (asynchronously), retried as tx retries.
func (s *Store) txPipelined(ctx context.Context, fn func(tx pgx.Tx, ends *txEnds) error) error {
	return s.pipelined(ctx, false, fn)
}

func (s *Store) pipelined(ctx context.Context, durable bool, fn func(tx pgx.Tx, ends *txEnds) error) error {
	return s.retrying(ctx, func() error { return s.pipelinedOnce(ctx, durable, fn) })
}

// txRepeatable is txPipelined for a transaction that is repeatable: run
// again also when whether its COMMIT ran is not known. durable: its BEGIN
// sets synchronous_commit = on for the transaction (as txDurable).
func (s *Store) txRepeatable(ctx context.Context, durable bool, fn func(tx pgx.Tx, ends *txEnds) error) error {
	return s.retrying(ctx, repeatable(ctx, func() error { return s.pipelinedOnce(ctx, durable, fn) }))
}

// txOne is a transaction of one statement, sql with args, in one round
// trip: the BEGIN (and a test clock) and the COMMIT ride with it. scan
// reads the statement's rows; an error it returns rolls the transaction
// back. Committed as tx commits (asynchronously), or synchronously when
// durable; the statement must be repeatable (txRepeatable): a version's
// record or an audit verdict.
func (s *Store) txOne(ctx context.Context, durable bool, scan func(pgx.Rows) error, sql string, args ...any) error {
	return s.txRepeatable(ctx, durable, func(tx pgx.Tx, ends *txEnds) error {
		b := &pgx.Batch{}
		b.Queue(sql, args...)
		skip := ends.first(b)
		return sendLastReading(ctx, tx, ends, b, skip+1, func(br pgx.BatchResults) error {
			for range skip {
				if _, err := br.Exec(); err != nil {
					return err
				}
			}
			rows, err := br.Query()
			if err != nil {
				return err
			}
			err = scan(rows)
			rows.Close()
			if rerr := rows.Err(); err == nil {
				err = rerr
			}
			return err
		})
	})
}

// txEnds puts a pipelined transaction's BEGIN and COMMIT into fn's batches.
type txEnds struct {
	clock   store.Clock
	durable bool // the commit is synchronous (txRepeatable's durable)
	begun   bool
	commit  bool // the COMMIT is queued in fn's last batch (last)
	// atCommit: the statements before that COMMIT all succeeded, and its
	// own result is read next (committed).
	atCommit bool
	// runEnd, when set, is a run the transaction may end (a visit's end
	// that left none of its dependents to run): the submission's lock and
	// the run's end (queueRunEnd) go into the batch that carries the
	// COMMIT, just before it, so the run's hot row is locked for no round
	// trip and no choice of the worker's. last queues them, committed
	// reads them.
	runEnd string
}

// first puts the BEGIN (and the test clock) at the head of b and returns
// how many results to skip before b's own; nothing once the transaction
// began (a claim that follows a finish in its transaction).
func (e *txEnds) first(b *pgx.Batch) int {
	if e.begun {
		return 0
	}
	head := []*pgx.QueuedQuery{{SQL: "BEGIN ISOLATION LEVEL READ COMMITTED"}}
	if e.durable {
		head = append(head, &pgx.QueuedQuery{SQL: "SET LOCAL synchronous_commit = on"})
	}
	if e.clock != nil {
		head = append(head, &pgx.QueuedQuery{SQL: `SELECT set_config('pipec.now', $1, true)`,
			Arguments: []any{e.clock().UTC().Format(time.RFC3339Nano)}})
	}
	b.QueuedQueries = append(head, b.QueuedQueries...)
	e.begun = true
	return len(head)
}

// sendSkipping sends b as tx's next batch, with the transaction's opening
// statements at its head when it is the first (txEnds.first), and reads
// the results of those and of b's more first statements (a lock taken,
// say, whose rows nobody reads): what is left to read is the rest of b's.
// The caller closes br, whatever err says.
func sendSkipping(ctx context.Context, tx pgx.Tx, ends *txEnds, b *pgx.Batch, more int) (pgx.BatchResults, error) {
	skip := ends.first(b) + more
	br := tx.SendBatch(ctx, b)
	for range skip {
		if _, err := br.Exec(); err != nil {
			return br, err
		}
	}
	return br, nil
}

// last puts the COMMIT at the tail of b, fn's last batch: a statement of b
// that fails aborts the transaction before it, and fn reads its result
// (committed) after b's own.
func (e *txEnds) last(b *pgx.Batch) {
	if e.runEnd != "" {
		queueRunEnd(b, e.runEnd)
	}
	b.Queue("COMMIT")
	e.commit = true
}

// tail is how many statements last queued: the run's end, and the COMMIT.
func (e *txEnds) tail() int {
	if e.runEnd != "" {
		return runEndStatements + 1
	}
	return 1
}

// committed reads the result of the COMMIT that last queued (and of the
// run's end before it).
func (e *txEnds) committed(br pgx.BatchResults) error {
	if e.runEnd != "" {
		if err := readRunEnd(br, e.runEnd); err != nil {
			return err
		}
	}
	e.atCommit = true
	tag, err := br.Exec()
	if err == nil && tag.String() != "COMMIT" {
		err = pgx.ErrTxCommitRollback // the transaction had failed
	}
	return err
}

// serverSaid says whether err is the server's own answer to a statement
// (an ErrorResponse), not a connection that failed under it. Read at a
// statement before a batch's COMMIT, it says that the server skipped the
// COMMIT: a batch ends in one Sync, and the server skips everything up to
// it once a statement failed, or ends the session (a FATAL, as a restart
// sends) without running the rest.
func serverSaid(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// sendLast sends b, fn's last batch, with the COMMIT.
func sendLast(ctx context.Context, tx pgx.Tx, ends *txEnds, b *pgx.Batch) error {
	return sendLastReading(ctx, tx, ends, b, 0, nil)
}

// sendLastReading is sendLast, with read reading the results of b's first
// statements (the first of them); the others' are only checked.
func sendLastReading(ctx context.Context, tx pgx.Tx, ends *txEnds, b *pgx.Batch, first int, read func(pgx.BatchResults) error) error {
	ends.last(b)
	br := tx.SendBatch(ctx, b)
	var err error
	if read != nil {
		err = read(br)
	}
	for i := first; err == nil && i < b.Len()-ends.tail(); i++ {
		_, err = br.Exec()
	}
	if err == nil {
		err = ends.committed(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *Store) pipelinedOnce(ctx context.Context, durable bool, fn func(tx pgx.Tx, ends *txEnds) error) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	ends := &txEnds{clock: s.clock, durable: durable}
	err = fn(connTx{c.Conn()}, ends)
	if !ends.begun {
		return err
	}
	if err == nil && !ends.commit && ends.runEnd != "" {
		// The run's end rides with the COMMIT, here a batch of its own.
		err = sendLast(ctx, connTx{c.Conn()}, ends, &pgx.Batch{})
	}
	if err != nil {
		// Also after a COMMIT fn queued: a statement before it failed, so
		// the server skipped it and the transaction is aborted (a
		// ROLLBACK outside one only warns).
		if _, rerr := c.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			_ = c.Conn().Close(context.WithoutCancel(ctx)) // not reusable in an unknown state
		}
		if !ends.commit || !ends.atCommit && serverSaid(err) {
			return safeAgain{err}
		}
		return err
	}
	if ends.commit {
		return nil
	}
	tag, err := c.Exec(ctx, "COMMIT")
	if err == nil && tag.String() != "COMMIT" {
		err = pgx.ErrTxCommitRollback // the transaction had failed
	}
	return err
}

// connTx is a connection inside a transaction that txPipelined began and
// ends; fn may not begin, commit or roll back itself.
type connTx struct{ c *pgx.Conn }

var errManagedTx = errors.New("postgres: the transaction is txPipelined's to end")

func (t connTx) Begin(context.Context) (pgx.Tx, error) { return nil, errManagedTx }
func (t connTx) Commit(context.Context) error          { return errManagedTx }
func (t connTx) Rollback(context.Context) error        { return errManagedTx }
func (t connTx) CopyFrom(ctx context.Context, name pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return t.c.CopyFrom(ctx, name, cols, src)
}
func (t connTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.c.SendBatch(ctx, b)
}
func (t connTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }
func (t connTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.c.Prepare(ctx, name, sql)
}
func (t connTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.c.Exec(ctx, sql, args...)
}
func (t connTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.c.Query(ctx, sql, args...)
}
func (t connTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.c.QueryRow(ctx, sql, args...)
}
func (t connTx) Conn() *pgx.Conn { return t.c }
