package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/pipec/pipec/runtime/store"
)

// errEpochSpent: the tokens of the current epoch ran out; the write is
// retried with a new, durably recorded epoch.
var errEpochSpent = errors.New("token epoch spent")

// grantToken takes the next token of resource inside a transaction of a
// write made with mode grants. The token is the greater of the resource's
// last token + 1 and the first token of this handle's epoch, so it exceeds
// every token granted before, by any handle, in any epoch. The counter update
// itself is not fsynced (see the package doc: the epoch is), and the UPSERT
// runs under the write lock, so no two grants ever see the same value.
func (s *Store) grantToken(ctx context.Context, tx *wtx, resource string) (int64, error) {
	if resource == "" {
		return 0, fmt.Errorf("token: resource is required")
	}
	if s.txEpoch == 0 {
		return 0, fmt.Errorf("token: no epoch (a grant outside a grants write)")
	}
	var last, newest int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE((SELECT last FROM tokens WHERE resource = ?), 0), (SELECT epoch FROM epochs)`,
		resource).Scan(&last, &newest); err != nil {
		return 0, err
	}
	tok := max(last+1, s.txEpoch*store.EpochSpan)
	if tok >= (newest+1)*store.EpochSpan {
		// Would reach into an epoch nobody recorded yet, which a crash could
		// hand out again: record a new epoch first.
		return 0, errEpochSpent
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO tokens (resource, last) VALUES (?, ?)
ON CONFLICT (resource) DO UPDATE SET last = excluded.last`, resource, tok)
	return tok, err
}

// NextToken implements Store. See the package doc for why it survives power
// loss without an fsync of its own.
func (s *Store) NextToken(ctx context.Context, resource string) (int64, error) {
	var tok int64
	err := s.write(ctx, grants, func(ctx context.Context, tx *wtx) error {
		var err error
		tok, err = s.grantToken(ctx, tx, resource)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("next token for %q: %w", resource, err)
	}
	return tok, nil
}

const attemptColumns = `run, task, number, resource, token, state, class, exit_code, error_tail, started, ended, lease_expiry, worker, pid,
host, boot_id, pgid, proc_start, reads`

func scanAttempt(sc interface{ Scan(...any) error }) (store.Attempt, error) {
	var a store.Attempt
	var state string
	var started, ended, expiry int64
	var reads string
	if err := sc.Scan(&a.Run, &a.Task, &a.Number, &a.Resource, &a.Token, &state, &a.Class, &a.ExitCode, &a.ErrorTail,
		&started, &ended, &expiry, &a.Worker, &a.PID, &a.Host, &a.Boot, &a.PGID, &a.ProcStart, &reads); err != nil {
		return store.Attempt{}, err
	}
	var err error
	if a.Reads, err = store.ParseReads(reads); err != nil {
		return store.Attempt{}, err
	}
	a.State = store.AttemptState(state)
	a.Started, a.Ended, a.LeaseExpiry = timeOf(started), timeOf(ended), timeOf(expiry)
	return a, nil
}

func getAttempt(ctx context.Context, q rowQuerier, ref store.AttemptRef) (store.Attempt, error) {
	a, err := scanAttempt(q.QueryRowContext(ctx, `SELECT `+attemptColumns+` FROM attempts WHERE run = ? AND task = ? AND number = ?`,
		ref.Run, ref.Task, ref.Number))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Attempt{}, fmt.Errorf("attempt %s: %w", ref, store.ErrNotFound)
	}
	return a, err
}

// getAttemptHead reads what the state changes decide on (every column but
// ended, lease and pid), on the path of every task: a queued or running
// attempt has no end, and the changes set lease and pid themselves.
func getAttemptHead(ctx context.Context, q rowQuerier, ref store.AttemptRef) (store.Attempt, error) {
	a := store.Attempt{AttemptRef: ref}
	var state string
	var started int64
	err := q.QueryRowContext(ctx, `SELECT resource, token, state, class, exit_code, error_tail, started, worker FROM attempts
WHERE run = ? AND task = ? AND number = ?`, ref.Run, ref.Task, ref.Number).Scan(&a.Resource, &a.Token, &state, &a.Class,
		&a.ExitCode, &a.ErrorTail, &started, &a.Worker)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Attempt{}, fmt.Errorf("attempt %s: %w", ref, store.ErrNotFound)
	}
	a.State, a.Started = store.AttemptState(state), timeOf(started)
	return a, err
}

// expiry is the lease expiry for a lease starting at now; 0 for no lease.
func expiry(now int64, lease time.Duration) int64 {
	if lease <= 0 {
		return 0
	}
	return now + int64(lease)
}

// StartAttempt implements Store. It grants a token (see NextToken).
func (s *Store) StartAttempt(ctx context.Context, spec store.AttemptSpec) (store.Attempt, error) {
	if err := spec.Check(); err != nil {
		return store.Attempt{}, err
	}
	var a store.Attempt
	err := s.write(ctx, grants, func(ctx context.Context, tx *wtx) error {
		return s.startAttempt(ctx, tx, spec, &a)
	})
	if err != nil {
		return store.Attempt{}, fmt.Errorf("start attempt of %s in %s: %w", spec.Task, spec.Run, err)
	}
	return a, nil
}

// startAttempt is StartAttempt's write in tx, a write made with mode grants
// (the worker queue's claim starts the claimed task's attempt in its own).
func (s *Store) startAttempt(ctx context.Context, tx *wtx, spec store.AttemptSpec, a *store.Attempt) error {
	if spec.Resource == "" {
		// Refused as a grant would be, after the run's own checks.
		if err := runIsRunning(ctx, tx, spec.Run); err != nil {
			return err
		}
		return fmt.Errorf("token: resource is required")
	}
	if s.txEpoch == 0 {
		return fmt.Errorf("token: no epoch (a grant outside a grants write)")
	}
	// The grant (see grantToken), the run's state and the task's next
	// attempt number in one statement, on the path of every task. A
	// refusal below fails the write, which undoes the grant.
	var runState sql.NullString
	var n int
	var tok, newest int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO tokens (resource, last) VALUES (?1, ?2)
ON CONFLICT (resource) DO UPDATE SET last = MAX(last + 1, ?2)
RETURNING last, (SELECT epoch FROM epochs), (SELECT state FROM runs WHERE id = ?3),
	(SELECT COALESCE(MAX(number), 0) + 1 FROM attempts WHERE run = ?3 AND task = ?4)`,
		spec.Resource, s.txEpoch*store.EpochSpan, spec.Run, spec.Task).Scan(&tok, &newest, &runState, &n); err != nil {
		return err
	}
	if err := runStateIsRunning(spec.Run, runState); err != nil {
		return err
	}
	if tok >= (newest+1)*store.EpochSpan {
		return errEpochSpent // as grantToken: a new epoch is recorded first
	}
	now := s.now()
	*a = store.Attempt{
		AttemptRef: store.AttemptRef{Run: spec.Run, Task: spec.Task, Number: n},
		Resource:   spec.Resource,
		Token:      tok,
		State:      store.AttemptRunning,
		Worker:     spec.Worker,
		PID:        spec.PID,
		Host:       spec.Host,
		Boot:       spec.Boot,
	}
	if spec.Queued {
		a.State = store.AttemptQueued
	} else {
		a.Started = timeOf(now)
		a.LeaseExpiry = timeOf(expiry(now, spec.Lease))
	}
	var leaseBoot string
	var leaseUntil int64
	if !spec.Queued {
		leaseBoot, leaseUntil = s.leaseUntil(spec.Lease)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO attempts (run, task, number, resource, token, state, started, lease_ms, lease_expiry, worker, pid,
host, boot_id, lease_boot, lease_until)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.Run, a.Task, a.Number, a.Resource, a.Token, string(a.State), nanos(a.Started), spec.Lease.Milliseconds(),
		nanos(a.LeaseExpiry), a.Worker, a.PID, a.Host, a.Boot, leaseBoot, leaseUntil); err != nil {
		return err
	}
	return appendEvent(ctx, tx, now, store.Event{Run: a.Run, Kind: store.EventAttemptStarted, Task: a.Task, Attempt: a.Number},
		store.StartedPayload(*a, spec.Lease))
}

// runIsRunning refuses a run that does not exist or is no longer running.
func runIsRunning(ctx context.Context, tx *wtx, run string) error {
	var state sql.NullString
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT state FROM runs WHERE id = ?)`, run).Scan(&state); err != nil {
		return err
	}
	return runStateIsRunning(run, state)
}

func runStateIsRunning(run string, state sql.NullString) error {
	if !state.Valid {
		return fmt.Errorf("run %q: %w", run, store.ErrNotFound)
	}
	if store.RunState(state.String) != store.RunRunning {
		return fmt.Errorf("run %q is %s: %w", run, state.String, store.ErrConflict)
	}
	return nil
}

// MarkRunning implements Store: MarkRunningAs with only a pid (its own group).
func (s *Store) MarkRunning(ctx context.Context, ref store.AttemptRef, pid int, lease time.Duration) (store.Attempt, error) {
	return s.MarkRunningAs(ctx, ref, store.Running{Process: store.Process{PID: pid, PGID: pid}, Lease: lease})
}

// RenewLease implements Store. A lease of 0 renews by the attempt's own lease
// duration (the one given to StartAttempt or MarkRunning), so a heartbeat
// command need not know it.
func (s *Store) RenewLease(ctx context.Context, ref store.AttemptRef, token int64, lease time.Duration) error {
	return s.write(ctx, normal, func(ctx context.Context, tx *wtx) error {
		// One conditional update: the WHERE is the safety (an attempt marked
		// unknown, finished or re-granted is never extended), not a read
		// before the write.
		now, lc := s.now(), s.lease()
		res, err := tx.ExecContext(ctx, `UPDATE attempts SET lease_expiry = CASE
	WHEN ?1 > 0 THEN ?2 + ?1
	WHEN lease_ms > 0 THEN ?2 + lease_ms * 1000000
	ELSE lease_expiry END,
lease_until = CASE
	WHEN ?1 > 0 THEN ?7 + ?1
	WHEN lease_ms > 0 THEN ?7 + lease_ms * 1000000
	ELSE lease_until END,
lease_boot = ?8
WHERE run = ?3 AND task = ?4 AND number = ?5 AND state = 'running' AND token = ?6`,
			int64(max(lease, 0)), now, ref.Run, ref.Task, ref.Number, token, lc.Nanos, lc.Boot)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		cur, err := getAttempt(ctx, tx, ref)
		if err != nil {
			return fmt.Errorf("renew lease of %s: %w", ref, err)
		}
		return fmt.Errorf("renew lease of %s (token %d): attempt is %s with token %d: %w", ref, token, cur.State, cur.Token, store.ErrLeaseLost)
	})
}

// changed turns an UPDATE's result into ErrConflict when it changed no row:
// its WHERE (the state it expected) no longer held.
func changed(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("changed concurrently: %w", store.ErrConflict)
	}
	return nil
}

// MarkUnknown implements Store.
func (s *Store) MarkUnknown(ctx context.Context) ([]store.Attempt, error) {
	var out []store.Attempt
	err := s.write(ctx, normal, func(ctx context.Context, tx *wtx) error {
		out = nil
		now, lc := s.now(), s.lease()
		rows, err := tx.QueryContext(ctx, `SELECT `+attemptColumns+` FROM attempts
WHERE state = 'running' AND lease_expiry > 0 AND (lease_boot != ? OR lease_until <= ?) ORDER BY run, task, number`, lc.Boot, lc.Nanos)
		if err != nil {
			return err
		}
		var expired []store.Attempt
		for rows.Next() {
			a, err := scanAttempt(rows)
			if err != nil {
				rows.Close()
				return err
			}
			expired = append(expired, a)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, a := range expired {
			if err := changed(tx.ExecContext(ctx, `UPDATE attempts SET state = 'unknown'
WHERE run = ? AND task = ? AND number = ? AND state = 'running' AND token = ?`, a.Run, a.Task, a.Number, a.Token)); err != nil {
				return err
			}
			if err := appendEvent(ctx, tx, now, store.Event{Run: a.Run, Kind: store.EventAttemptUnknown, Task: a.Task, Attempt: a.Number},
				store.UnknownPayload(a)); err != nil {
				return err
			}
			a.State = store.AttemptUnknown
			out = append(out, a)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mark unknown: %w", err)
	}
	return out, nil
}

// FinishAttempt implements Store.
func (s *Store) FinishAttempt(ctx context.Context, ref store.AttemptRef, o store.Outcome) error {
	if err := o.CheckEnd(ref); err != nil {
		return err
	}
	mode := normal
	if o.Synchronous() {
		mode = durable
	}
	return s.write(ctx, mode, func(ctx context.Context, tx *wtx) error { return s.finishAttempt(ctx, tx, ref, o) })
}

// finishAttempt is FinishAttempt inside a write transaction (the worker
// queue's Finish records a visit's last attempt with it, Tx.FinishAttempt).
// An end that comes with the attempt as its caller left it (Outcome.Was)
// is written on that: the row is read, and the end decided on it, only
// when the update found the row otherwise, or the end is not one to write
// on what the caller assumed (a noop or a refusal is the row's to say).
func (s *Store) finishAttempt(ctx context.Context, tx *wtx, ref store.AttemptRef, o store.Outcome) error {
	if was := o.Was; was != nil && was.AttemptRef == ref {
		if o, noop, err := judged(*was, o); !noop && err == nil {
			if missed, err := s.writeFinish(ctx, tx, *was, o); !missed || err != nil {
				return err
			}
		}
	}
	cur, err := getAttemptHead(ctx, tx, ref)
	if err != nil {
		return err
	}
	o, noop, err := judged(cur, o)
	if noop || err != nil {
		return err
	}
	missed, err := s.writeFinish(ctx, tx, cur, o)
	if missed {
		return fmt.Errorf("finish attempt %s: changed concurrently: %w", ref, store.ErrConflict)
	}
	return err
}

// judged is o as it applies to cur (Outcome.Against; its process recorded
// only while cur may still become running) and FinishAttempt's judgement of it
// (store.CheckFinish).
func judged(cur store.Attempt, o store.Outcome) (store.Outcome, bool, error) {
	o = o.Against(cur)
	if o.Ran != nil && !cur.State.CanBecome(store.AttemptRunning) {
		o.Ran = nil
	}
	noop, err := store.CheckFinish(cur, o, o.Ran != nil)
	return o, noop, err
}

// writeFinish records o on the attempt cur in one UPDATE, conditional on
// cur's state and token (the WHERE is the safety), and one statement for
// its events; missed when the update found no row so (nothing is written
// then). With Outcome.Ran the UPDATE first records the process exactly as
// MarkRunningAs would (the same columns, and the attempt.running event
// from a queued attempt), so a short task's end costs no more statements
// than any end. (UPDATE ... RETURNING would save finishAttempt's read, but
// SQLite buffers RETURNING rows in a temporary table, which costs more
// than the read.)
func (s *Store) writeFinish(ctx context.Context, tx *wtx, cur store.Attempt, o store.Outcome) (missed bool, err error) {
	ref := cur.AttemptRef
	now := s.now()
	var res sql.Result
	if o.Ran == nil {
		res, err = tx.ExecContext(ctx, `UPDATE attempts SET state = ?, class = ?, exit_code = ?, error_tail = ?, ended = ?, lease_expiry = 0,
reads = ? WHERE run = ? AND task = ? AND number = ? AND state = ? AND token = ?`, string(o.State), o.Class, o.ExitCode, o.ErrorTail, now,
			store.ReadsText(o.Reads), ref.Run, ref.Task, ref.Number, string(cur.State), cur.Token)
	} else {
		p, lease := o.Ran.Process, o.Ran.Lease
		leaseBoot, leaseUntil := s.leaseUntil(lease)
		// Started now from queued, kept from running, as markRunning does;
		// host and boot_id are kept when the process names no host;
		// lease_expiry ends at 0, as a finish leaves it.
		res, err = tx.ExecContext(ctx, `UPDATE attempts SET state = ?1, class = ?2, exit_code = ?3, error_tail = ?4, ended = ?5,
lease_expiry = 0, started = CASE WHEN state = 'queued' THEN ?5 ELSE started END, pid = ?6, pgid = ?7, proc_start = ?8,
host = CASE WHEN ?9 <> '' THEN ?9 ELSE host END, boot_id = CASE WHEN ?9 <> '' THEN ?10 ELSE boot_id END,
lease_ms = ?11, lease_boot = ?12, lease_until = ?13, reads = ?19
WHERE run = ?14 AND task = ?15 AND number = ?16 AND state = ?17 AND token = ?18`,
			string(o.State), o.Class, o.ExitCode, o.ErrorTail, now, p.PID, p.PGID, int64(p.Start), p.Host, p.Boot,
			lease.Milliseconds(), leaseBoot, leaseUntil, ref.Run, ref.Task, ref.Number, string(cur.State), cur.Token,
			store.ReadsText(o.Reads))
	}
	if err != nil {
		return false, fmt.Errorf("finish attempt %s: %w", ref, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	if n == 0 {
		return true, nil
	}
	was := cur.State
	if o.Ran != nil {
		was = store.AttemptRunning
	}
	finished := eventRow{store.Event{Run: ref.Run, Kind: store.EventAttemptFinished, Task: ref.Task, Attempt: ref.Number},
		store.FinishedPayload(o, cur.Token, was)}
	if o.Ran == nil || cur.State != store.AttemptQueued {
		return false, appendEvent(ctx, tx, now, finished.e, finished.payload)
	}
	running := eventRow{store.Event{Run: ref.Run, Kind: store.EventAttemptRunning, Task: ref.Task, Attempt: ref.Number},
		store.RunningPayload(cur.Token, *o.Ran)}
	return false, appendEvents(ctx, tx, now, running, finished)
}

// GetAttempt implements Store.
func (s *Store) GetAttempt(ctx context.Context, ref store.AttemptRef) (store.Attempt, error) {
	return getAttempt(ctx, prepared{s}, ref)
}

// Attempts implements Store.
func (s *Store) Attempts(ctx context.Context, run string) ([]store.Attempt, error) {
	return s.attempts(ctx, `SELECT `+attemptColumns+` FROM attempts WHERE run = ? ORDER BY task, number`, run)
}

// TaskAttempts implements Store.
func (s *Store) TaskAttempts(ctx context.Context, resource, task string) ([]store.Attempt, error) {
	return s.attempts(ctx, `SELECT `+attemptColumns+` FROM attempts WHERE resource = ? AND task = ? ORDER BY token`, resource, task)
}

// attempts reads the attempts query selects (attemptColumns).
func (s *Store) attempts(ctx context.Context, query string, args ...any) ([]store.Attempt, error) {
	rows, err := s.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Attempt
	for rows.Next() {
		a, err := scanAttempt(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// StateID implements Store.
// The id never changes (store.Store), so it is read once per handle: a
// worker asks at every visit.
func (s *Store) StateID(ctx context.Context) (string, error) {
	if id := s.stateID.Load(); id != nil {
		return *id, nil
	}
	var id string
	if err := s.queryRow(ctx, `SELECT state_id FROM state_identity`).Scan(&id); err != nil {
		return "", fmt.Errorf("state id: %w", err)
	}
	s.stateID.Store(&id)
	return id, nil
}

// RaiseTokens implements Store. Durable: a sink adopted by this state
// refuses every token not above floor, so a raise lost to a power cut would
// make the state's next grants useless there.
func (s *Store) RaiseTokens(ctx context.Context, resources []string, floor int64, reason string) error {
	if floor <= 0 || len(resources) == 0 {
		return nil
	}
	return s.write(ctx, durable, func(ctx context.Context, tx *wtx) error {
		for _, res := range resources {
			if res == "" {
				return fmt.Errorf("raise tokens: empty resource")
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO tokens (resource, last) VALUES (?, ?)
ON CONFLICT (resource) DO UPDATE SET last = MAX(last, excluded.last)`, res, floor); err != nil {
				return err
			}
		}
		// Tokens above floor may lie in an epoch nobody recorded here; record
		// it, so grants there are not refused as spent (and a handle opened
		// later records a higher one still).
		if _, err := tx.ExecContext(ctx, `UPDATE epochs SET epoch = MAX(epoch, ?)`, floor/store.EpochSpan); err != nil {
			return err
		}
		return appendEvent(ctx, tx, s.now(), store.Event{Kind: store.EventTokensRaised}, map[string]any{
			"resources": resources, "floor": floor, "reason": reason})
	})
}

// MarkRunningAs implements Store.
func (s *Store) MarkRunningAs(ctx context.Context, ref store.AttemptRef, run store.Running) (store.Attempt, error) {
	mode := normal
	if run.Durable {
		mode = durable
	}
	var a store.Attempt
	err := s.write(ctx, mode, func(ctx context.Context, tx *wtx) error {
		var err error
		a, err = s.markRunning(ctx, tx, ref, run)
		return err
	})
	if err != nil {
		return store.Attempt{}, fmt.Errorf("mark running: %w", err)
	}
	return a, nil
}

// markRunning is MarkRunningAs inside a write (writeFinish writes the same
// columns for an Outcome.Ran).
func (s *Store) markRunning(ctx context.Context, tx *wtx, ref store.AttemptRef, run store.Running) (store.Attempt, error) {
	p, lease := run.Process, run.Lease
	cur, err := getAttempt(ctx, tx, ref)
	if err != nil {
		return store.Attempt{}, err
	}
	if !cur.State.CanBecome(store.AttemptRunning) {
		return store.Attempt{}, fmt.Errorf("attempt %s is %s: %w", ref, cur.State, store.ErrConflict)
	}
	now := s.now()
	started := nanos(cur.Started)
	if cur.State == store.AttemptQueued {
		started = now
	}
	host, boot := cur.Host, cur.Boot
	if p.Host != "" {
		host, boot = p.Host, p.Boot
	}
	// Conditional on the state and token read above: the WHERE is the
	// safety, not the read.
	leaseBoot, leaseUntil := s.leaseUntil(lease)
	if err := changed(tx.ExecContext(ctx, `UPDATE attempts SET state = 'running', started = ?, pid = ?, pgid = ?, proc_start = ?,
host = ?, boot_id = ?, lease_ms = ?, lease_expiry = ?, lease_boot = ?, lease_until = ?
WHERE run = ? AND task = ? AND number = ? AND state = ? AND token = ?`, started, p.PID, p.PGID, int64(p.Start), host, boot,
		lease.Milliseconds(), expiry(now, lease), leaseBoot, leaseUntil, ref.Run, ref.Task, ref.Number, string(cur.State), cur.Token)); err != nil {
		return store.Attempt{}, fmt.Errorf("attempt %s: %w", ref, err)
	}
	if cur.State == store.AttemptQueued {
		if err := appendEvent(ctx, tx, now, store.Event{Run: ref.Run, Kind: store.EventAttemptRunning, Task: ref.Task, Attempt: ref.Number},
			store.RunningPayload(cur.Token, store.Running{Process: p, Lease: lease})); err != nil {
			return store.Attempt{}, err
		}
	}
	// The update's values, without reading the row back.
	a := cur
	a.State, a.Started, a.LeaseExpiry = store.AttemptRunning, timeOf(started), timeOf(expiry(now, lease))
	a.PID, a.PGID, a.ProcStart, a.Host, a.Boot = p.PID, p.PGID, p.Start, host, boot
	return a, nil
}

// ResolveAttempt implements Store. The attempt's class becomes "resolved"
// and its error tail the reason; the event keeps who, why and as what.
func (s *Store) ResolveAttempt(ctx context.Context, ref store.AttemptRef, as store.AttemptState, reason, by string) (store.Attempt, error) {
	if !as.Finished() {
		return store.Attempt{}, fmt.Errorf("resolve %s: %q is not succeeded or failed", ref, as)
	}
	var a store.Attempt
	err := s.write(ctx, durable, func(ctx context.Context, tx *wtx) error {
		cur, err := getAttempt(ctx, tx, ref)
		if err != nil {
			return err
		}
		if cur.State != store.AttemptUnknown {
			return fmt.Errorf("resolve %s: the attempt is %s, only an unknown attempt can be resolved: %w", ref, cur.State, store.ErrConflict)
		}
		now := s.now()
		if err := changed(tx.ExecContext(ctx, `UPDATE attempts SET state = ?, class = ?, exit_code = 0, error_tail = ?, ended = ?, lease_expiry = 0
WHERE run = ? AND task = ? AND number = ? AND state = 'unknown'`, string(as), store.ClassResolved, reason, now, ref.Run, ref.Task, ref.Number)); err != nil {
			return fmt.Errorf("resolve %s: %w", ref, err)
		}
		if err := appendEvent(ctx, tx, now, store.Event{Run: ref.Run, Kind: store.EventAttemptResolved, Task: ref.Task, Attempt: ref.Number},
			map[string]any{"as": string(as), "reason": reason, "by": by, "token": cur.Token}); err != nil {
			return err
		}
		a, err = getAttempt(ctx, tx, ref)
		return err
	})
	if err != nil {
		return store.Attempt{}, err
	}
	return a, nil
}
