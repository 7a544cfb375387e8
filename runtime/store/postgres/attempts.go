package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pipec/pipec/runtime/store"
)

// epochSpanSQL is store.EpochSpan as SQL text, for the statements' constant
// strings (TestEpochSpanSQL holds the two equal).
const epochSpanSQL = "1000000000"

// errNewEpoch: this handle's epoch was taken back by a crash, or its tokens
// ran out; the grant is made again after a new epoch is recorded.
var errNewEpoch = errors.New("token epoch must be renewed")

// epochRefused reports a statement that pipec_epoch_refused failed: its
// grant was refused as a false valid column refuses one.
func epochRefused(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "PE001"
}

// finishMissed reports a statement that pipec_finish_missed failed: a
// guarded write found its row not as the caller assumed.
func finishMissed(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "PE002"
}

// currentEpoch returns this handle's epoch, recording a new one durably
// first when it has none.
func (s *Store) currentEpoch(ctx context.Context) (int64, error) {
	s.epochMu.Lock()
	defer s.epochMu.Unlock()
	if s.epoch != 0 {
		return s.epoch, nil
	}
	var e int64
	err := s.txDurable(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `UPDATE epochs SET epoch = epoch + 1 RETURNING epoch`).Scan(&e); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO epochs_alive (epoch) VALUES ($1) ON CONFLICT DO NOTHING`, e)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("record a token epoch: %w", err)
	}
	s.epoch = e
	return e, nil
}

// dropEpoch forgets epoch e (if still this handle's), so the next grant
// records a new one.
func (s *Store) dropEpoch(e int64) {
	s.epochMu.Lock()
	if s.epoch == e {
		s.epoch = 0
	}
	s.epochMu.Unlock()
}

// granting runs fn, a transaction that grants tokens with epoch, again under
// a new epoch while it reports errNewEpoch.
func (s *Store) granting(ctx context.Context, fn func(epoch int64) error) error {
	for try := 0; ; try++ {
		e, err := s.currentEpoch(ctx)
		if err != nil {
			return err
		}
		err = fn(e)
		if !errors.Is(err, errNewEpoch) || try >= 8 {
			return err
		}
		// A grant is refused when the epoch was taken back by a crash, when
		// its tokens ran out, or when the statement's snapshot saw an older
		// newest epoch than the token another handle had just granted under
		// an epoch recorded meanwhile (the row lock makes the UPSERT see that
		// newer token). The last is a race a fresh statement under the same
		// epoch settles, so the first retry keeps a live epoch; only a retry
		// refused again records a new one (several handles renewing epochs
		// at once could otherwise invalidate each other's grants in turn).
		if try%2 == 0 && s.epochAlive(ctx, e) {
			continue
		}
		s.dropEpoch(e)
	}
}

// epochAlive reports whether epoch e is still marked alive (no crash took
// it back since it was recorded).
func (s *Store) epochAlive(ctx context.Context, e int64) bool {
	var alive bool
	err := s.read().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM epochs_alive WHERE epoch = $1)`, e).Scan(&alive)
	return err == nil && alive
}

// grantSQL is the grant of the next token of resource $1 under epoch $2, as
// a CTE "g" (last: the token): the row lock of the UPSERT serializes grants
// of the resource from any connection; valid is false when the epoch was
// taken back by a crash or the token would reach past the newest epoch.
const grantSQL = `g AS (
	INSERT INTO tokens (resource, last) VALUES ($1, $2::bigint * ` + epochSpanSQL + `)
	` + grantConflictSQL

// grantFromRSQL is grantSQL for the resource of the CTE "r" (column
// resource) instead of $1: no row when r has none.
const grantFromRSQL = `g AS (
	INSERT INTO tokens (resource, last) SELECT resource, $2::bigint * ` + epochSpanSQL + ` FROM r
	` + grantConflictSQL

const grantConflictSQL = `ON CONFLICT (resource) DO UPDATE SET last = GREATEST(tokens.last + 1, $2::bigint * ` + epochSpanSQL + `)
	RETURNING last,
		EXISTS (SELECT 1 FROM epochs_alive WHERE epoch = $2) AND last < ((SELECT epoch FROM epochs) + 1) * ` + epochSpanSQL + ` AS valid
)`

// NextToken implements store.Store (see the package doc's epochs).
func (s *Store) NextToken(ctx context.Context, resource string) (int64, error) {
	if resource == "" {
		return 0, fmt.Errorf("next token: resource is required")
	}
	var tok int64
	err := s.granting(ctx, func(epoch int64) error {
		return s.tx(ctx, func(tx pgx.Tx) error {
			var valid bool
			if err := tx.QueryRow(ctx, `WITH `+grantSQL+` SELECT last, valid FROM g`, resource, epoch).Scan(&tok, &valid); err != nil {
				return err
			}
			if !valid {
				return errNewEpoch
			}
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("next token for %q: %w", resource, err)
	}
	return tok, nil
}

const attemptColumns = `run, task, number, resource, token, state, class, exit_code, error_tail, started, ended, lease_expiry, worker, pid,
host, boot_id, pgid, proc_start, reads`

func scanAttempt(sc pgx.Row) (store.Attempt, error) {
	var a store.Attempt
	var state string
	var started, ended, expiry *time.Time
	var procStart int64
	var reads string
	if err := sc.Scan(&a.Run, &a.Task, &a.Number, &a.Resource, &a.Token, &state, &a.Class, &a.ExitCode, &a.ErrorTail,
		&started, &ended, &expiry, &a.Worker, &a.PID, &a.Host, &a.Boot, &a.PGID, &procStart, &reads); err != nil {
		return store.Attempt{}, err
	}
	var err error
	if a.Reads, err = store.ParseReads(reads); err != nil {
		return store.Attempt{}, err
	}
	a.ProcStart = uint64(procStart)
	a.State = store.AttemptState(state)
	a.Started, a.Ended, a.LeaseExpiry = timeOf(started), timeOf(ended), timeOf(expiry)
	return a, nil
}

func getAttempt(ctx context.Context, q queryer, ref store.AttemptRef, lock bool) (store.Attempt, error) {
	sql := `SELECT ` + attemptColumns + ` FROM attempts WHERE run = $1 AND task = $2 AND number = $3`
	if lock {
		sql += ` FOR UPDATE`
	}
	a, err := scanAttempt(q.QueryRow(ctx, sql, ref.Run, ref.Task, ref.Number))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Attempt{}, fmt.Errorf("attempt %s: %w", ref, store.ErrNotFound)
	}
	return a, err
}

// sortAttempts orders attempts by run, task, number, as the interface's
// lists are.
func sortAttempts(as []store.Attempt) {
	sort.Slice(as, func(i, j int) bool {
		a, b := as[i], as[j]
		if a.Run != b.Run {
			return a.Run < b.Run
		}
		if a.Task != b.Task {
			return a.Task < b.Task
		}
		return a.Number < b.Number
	})
}

// micros is a lease duration in the unit of the SQL interval arithmetic.
func micros(d time.Duration) int64 { return d.Microseconds() }

// StartAttempt implements store.Store. The run is share-locked (it cannot
// finish meanwhile), the task's next number is taken under an advisory lock
// on (run, task), and the token is granted in the same transaction.
// A session that ends under the start's COMMIT is settled by the row the
// INSERT returned (settled).
func (s *Store) StartAttempt(ctx context.Context, spec store.AttemptSpec) (store.Attempt, error) {
	if err := spec.Check(); err != nil {
		return store.Attempt{}, err
	}
	a, err := settled(ctx, func() (store.Attempt, bool, error) {
		a, err := s.startAttempt(ctx, spec)
		return a, a.Number > 0, err
	}, func(a store.Attempt) (bool, error) {
		got, err := s.GetAttempt(ctx, a.AttemptRef)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return err == nil && got.Token == a.Token, err
	})
	if err != nil {
		return store.Attempt{}, fmt.Errorf("start attempt of %s in %s: %w", spec.Task, spec.Run, err)
	}
	return a, nil
}

// startAttempt is one try of StartAttempt; its attempt is the row the
// INSERT returned (zero when it did not run), also when the COMMIT failed.
func (s *Store) startAttempt(ctx context.Context, spec store.AttemptSpec) (store.Attempt, error) {
	var a store.Attempt
	err := s.granting(ctx, func(epoch int64) error {
		return s.tx(ctx, func(tx pgx.Tx) error {
			a = store.Attempt{}
			// The run is share-locked (it cannot finish meanwhile) and the
			// task's next number read in one statement; two starts of one task
			// racing for a number meet on the primary key, and the loser runs
			// again (errRetry) with a fresh snapshot.
			var state string
			var n int
			err := tx.QueryRow(ctx, `SELECT r.state, (SELECT COALESCE(MAX(number), 0) + 1 FROM attempts WHERE run = $1 AND task = $2)
FROM runs r WHERE r.id = $1 FOR SHARE OF r`, spec.Run, spec.Task).Scan(&state, &n)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("run %q: %w", spec.Run, store.ErrNotFound)
			}
			if err != nil {
				return err
			}
			if store.RunState(state) != store.RunRunning {
				return fmt.Errorf("run %q is %s: %w", spec.Run, state, store.ErrConflict)
			}
			if spec.Resource == "" {
				return fmt.Errorf("token: resource is required")
			}
			st := store.AttemptRunning
			if spec.Queued {
				st = store.AttemptQueued
			}
			// The grant and the attempt in one statement: the token row's lock
			// serializes grants of the resource.
			var valid bool
			a, err = scanAttempt(trailedRow{tx.QueryRow(ctx, `WITH `+grantSQL+`, n AS (SELECT pipec_now() AS now)
INSERT INTO attempts (run, task, number, resource, token, state, started, lease_ms, lease_expiry, worker, pid, host, boot_id)
SELECT $3, $4, $5, $1, g.last, $6, CASE WHEN $7 THEN NULL ELSE n.now END, $8,
	CASE WHEN $7 OR $9::bigint <= 0 THEN NULL ELSE n.now + $9::bigint * interval '1 microsecond' END, $10, $11, $12, $13
FROM g, n
RETURNING `+attemptColumns+`, (SELECT valid FROM g)`,
				spec.Resource, epoch, spec.Run, spec.Task, n, string(st), spec.Queued, spec.Lease.Milliseconds(), micros(spec.Lease), spec.Worker, spec.PID,
				spec.Host, spec.Boot), []any{&valid}})
			if isUnique(err) {
				return errRetry
			}
			if err != nil {
				return err
			}
			if !valid {
				return errNewEpoch
			}
			return appendEvent(ctx, tx, store.Event{Run: a.Run, Kind: store.EventAttemptStarted, Task: a.Task, Attempt: a.Number},
				store.StartedPayload(a, spec.Lease))
		})
	})
	return a, err
}

// MarkRunning implements store.Store.
func (s *Store) MarkRunning(ctx context.Context, ref store.AttemptRef, pid int, lease time.Duration) (store.Attempt, error) {
	return s.MarkRunningAs(ctx, ref, store.Running{Process: store.Process{PID: pid, PGID: pid}, Lease: lease})
}

// MarkRunningAs implements store.Store. With Running.Durable (the start
// of a task that is not idempotent, recorded before its process starts)
// the commit is synchronous: a crash of the server takes back the last
// asynchronous commits, and a start it took back is one the next run
// would not know of, and would charge again.
func (s *Store) MarkRunningAs(ctx context.Context, ref store.AttemptRef, run store.Running) (store.Attempt, error) {
	var a store.Attempt
	err := s.runRepeatable(ctx, run.Durable, func(tx pgx.Tx) error {
		cur, err := getAttempt(ctx, tx, ref, true)
		if err != nil {
			return err
		}
		a, err = markRunning(ctx, tx, cur, run)
		return err
	})
	if err != nil {
		return store.Attempt{}, fmt.Errorf("mark running: %w", err)
	}
	return a, nil
}

// markRunningSQL records an attempt's process and lease (markRunningArgs).
const markRunningSQL = `UPDATE attempts SET state = 'running', started = COALESCE(started, n.now), pid = $4,
	lease_ms = $5, lease_expiry = CASE WHEN $6::bigint <= 0 THEN NULL ELSE n.now + $6::bigint * interval '1 microsecond' END,
	pgid = $7, proc_start = $8, host = $9, boot_id = $10
FROM (SELECT pipec_now() AS now) n
WHERE run = $1 AND task = $2 AND number = $3`

func markRunningArgs(cur store.Attempt, run store.Running) []any {
	p, lease, ref := run.Process, run.Lease, cur.AttemptRef
	host, boot := cur.Host, cur.Boot
	if p.Host != "" {
		host, boot = p.Host, p.Boot
	}
	return []any{ref.Run, ref.Task, ref.Number, p.PID, lease.Milliseconds(), micros(lease), p.PGID, int64(p.Start), host, boot}
}

// runningEvent is the attempt.running event of a queued attempt's start.
func runningEvent(cur store.Attempt, run store.Running) (store.Event, store.AttemptRunningPayload) {
	ref := cur.AttemptRef
	return store.Event{Run: ref.Run, Kind: store.EventAttemptRunning, Task: ref.Task, Attempt: ref.Number},
		store.RunningPayload(cur.Token, run)
}

// markRunning is MarkRunningAs inside a transaction, on cur as read with
// its row locked (FinishAttempt uses it too, see store.Outcome.Ran).
func markRunning(ctx context.Context, tx pgx.Tx, cur store.Attempt, run store.Running) (store.Attempt, error) {
	if !cur.State.CanBecome(store.AttemptRunning) {
		return store.Attempt{}, fmt.Errorf("attempt %s is %s: %w", cur.AttemptRef, cur.State, store.ErrConflict)
	}
	a, err := scanAttempt(tx.QueryRow(ctx, markRunningSQL+` RETURNING `+attemptColumns, markRunningArgs(cur, run)...))
	if err != nil {
		return store.Attempt{}, err
	}
	if cur.State == store.AttemptQueued {
		ev, payload := runningEvent(cur, run)
		if err := appendEvent(ctx, tx, ev, payload); err != nil {
			return store.Attempt{}, err
		}
	}
	return a, nil
}

// ResolveAttempt implements store.Store: one conditional UPDATE (still
// unknown) and its event, in one transaction.
func (s *Store) ResolveAttempt(ctx context.Context, ref store.AttemptRef, as store.AttemptState, reason, by string) (store.Attempt, error) {
	if !as.Finished() {
		return store.Attempt{}, fmt.Errorf("resolve %s: %q is not succeeded or failed", ref, as)
	}
	var a store.Attempt
	// Durable: a person was told it is settled. Repeatable: made again
	// after a COMMIT whose fate a restart hid, it finds its own
	// resolution (resolvedBy) and returns it.
	err := s.runRepeatable(ctx, true, func(tx pgx.Tx) error {
		cur, err := getAttempt(ctx, tx, ref, true)
		if err != nil {
			return err
		}
		if cur.State != store.AttemptUnknown {
			if ours, err := resolvedBy(ctx, tx, cur, as, reason, by); err != nil || ours {
				a = cur
				return err
			}
			return fmt.Errorf("resolve %s: the attempt is %s, only an unknown attempt can be resolved: %w", ref, cur.State, store.ErrConflict)
		}
		a, err = scanAttempt(tx.QueryRow(ctx, `UPDATE attempts SET state = $4, class = $5, exit_code = 0, error_tail = $6,
	ended = pipec_now(), lease_expiry = NULL
WHERE run = $1 AND task = $2 AND number = $3 AND state = 'unknown'
RETURNING `+attemptColumns, ref.Run, ref.Task, ref.Number, string(as), store.ClassResolved, reason))
		if err != nil {
			return err
		}
		return appendEvent(ctx, tx, store.Event{Run: ref.Run, Kind: store.EventAttemptResolved, Task: ref.Task, Attempt: ref.Number},
			map[string]any{"as": string(as), "reason": reason, "by": by, "token": cur.Token})
	})
	if err != nil {
		return store.Attempt{}, err
	}
	return a, nil
}

// resolvedBy reports whether a, no longer unknown, was resolved as as,
// for reason, by by: the resolution a ResolveAttempt made before its
// COMMIT's answer was lost.
func resolvedBy(ctx context.Context, tx pgx.Tx, a store.Attempt, as store.AttemptState, reason, by string) (bool, error) {
	if a.State != as || a.Class != store.ClassResolved || a.ErrorTail != reason {
		return false, nil
	}
	var found bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE run = $1 AND task = $2 AND attempt = $3 AND kind = $4
	AND payload::jsonb->>'by' = $5)`, a.Run, a.Task, a.Number, store.EventAttemptResolved, by).Scan(&found)
	return found, err
}

// RenewLease implements store.Store. The renewal is one conditional UPDATE
// (running, with this token): an attempt marked unknown meanwhile is never
// revived. A lease of 0 renews by the attempt's own lease duration.
func (s *Store) RenewLease(ctx context.Context, ref store.AttemptRef, token int64, lease time.Duration) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE attempts
SET lease_expiry = pipec_now() + (CASE WHEN $5::bigint > 0 THEN $5::bigint ELSE lease_ms * 1000 END) * interval '1 microsecond'
WHERE run = $1 AND task = $2 AND number = $3 AND state = 'running' AND token = $4 AND ($5::bigint > 0 OR lease_ms > 0)`,
			ref.Run, ref.Task, ref.Number, token, micros(lease))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		var state string
		var tok, leaseMS int64
		err = tx.QueryRow(ctx, `SELECT state, token, lease_ms FROM attempts WHERE run = $1 AND task = $2 AND number = $3`,
			ref.Run, ref.Task, ref.Number).Scan(&state, &tok, &leaseMS)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("renew lease of %s: %w", ref, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if store.AttemptState(state) != store.AttemptRunning || tok != token {
			return fmt.Errorf("renew lease of %s (token %d): attempt is %s with token %d: %w", ref, token, state, tok, store.ErrLeaseLost)
		}
		return nil // running, own token, no lease to renew
	})
}

// MarkUnknown implements store.Store: one UPDATE judged on the server's
// clock.
func (s *Store) MarkUnknown(ctx context.Context) ([]store.Attempt, error) {
	if ok, err := s.peek(ctx, `SELECT 1 FROM attempts WHERE state = 'running' AND lease_expiry <= pipec_now()`); err != nil || !ok {
		if err != nil {
			return nil, fmt.Errorf("mark unknown: %w", err)
		}
		return nil, nil
	}
	var out []store.Attempt
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out = nil
		rows, err := tx.Query(ctx, `UPDATE attempts SET state = 'unknown'
WHERE state = 'running' AND lease_expiry <= pipec_now() RETURNING `+attemptColumns)
		if err != nil {
			return err
		}
		expired, err := collect(rows, scanAttempt)
		if err != nil {
			return err
		}
		sortAttempts(expired)
		for _, a := range expired {
			if err := appendEvent(ctx, tx, store.Event{Run: a.Run, Kind: store.EventAttemptUnknown, Task: a.Task, Attempt: a.Number},
				store.UnknownPayload(a)); err != nil {
				return err
			}
		}
		out = expired
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mark unknown: %w", err)
	}
	return out, nil
}

// FinishAttempt implements store.Store.
func (s *Store) FinishAttempt(ctx context.Context, ref store.AttemptRef, o store.Outcome) error {
	if err := o.CheckEnd(ref); err != nil {
		return err
	}
	// Repeatable: the same end of a finished attempt is a no-op.
	return s.runRepeatable(ctx, o.Synchronous(), func(tx pgx.Tx) error { return finishAttempt(ctx, tx, ref, o) })
}

// finishAttempt is FinishAttempt inside a transaction (Finish of the queue
// records a visit's last attempt with it, see queue.Result.End).
func finishAttempt(ctx context.Context, tx pgx.Tx, ref store.AttemptRef, o store.Outcome) error {
	cur, err := getAttempt(ctx, tx, ref, true)
	if err != nil {
		return err
	}
	o = o.Against(cur)
	ran := o.Ran != nil && cur.State.CanBecome(store.AttemptRunning)
	if noop, err := store.CheckFinish(cur, o, ran); noop || err != nil {
		return err
	}
	if ran {
		// MarkRunningAs and FinishAttempt in one transaction: both or
		// neither commit (see store.Outcome.Ran for why that is safe).
		if cur, err = markRunning(ctx, tx, cur, *o.Ran); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE attempts SET state = $4, class = $5, exit_code = $6, error_tail = $7, ended = pipec_now(), lease_expiry = NULL,
reads = $8 WHERE run = $1 AND task = $2 AND number = $3`, ref.Run, ref.Task, ref.Number, string(o.State), o.Class, o.ExitCode, o.ErrorTail,
		store.ReadsText(o.Reads)); err != nil {
		return err
	}
	return appendEvent(ctx, tx, store.Event{Run: ref.Run, Kind: store.EventAttemptFinished, Task: ref.Task, Attempt: ref.Number},
		store.FinishedPayload(o, cur.Token, cur.State))
}

// queueFinishAttempt is finishAttempt for cur, read with its row locked,
// as one statement queued on b (Finish of the queue sends it with the
// DAG's step): the same checks, the same columns written (the process's,
// Outcome.Ran, then the end's) and the same events in the same order.
func queueFinishAttempt(b *pgx.Batch, cur store.Attempt, o store.Outcome) error {
	end, err := endOf(cur, o)
	if err != nil || end == nil {
		return err
	}
	b.Queue(`WITH n AS (SELECT pipec_now() AS now), u AS (
	`+end.update+`
)
INSERT INTO events (run, time, kind, task, attempt, payload)
SELECT $1, `+eventTime("n.now")+`, e.kind, $2, $3, e.payload FROM n, unnest($8::text[], $9::text[]) WITH ORDINALITY AS e(kind, payload, i) ORDER BY e.i`, end.args...)
	return nil
}

// attemptEnd is an attempt's end as SQL: update, the attempts row's
// update (of a CTE whose n holds the time), and args, its parameters: $1-$3
// the attempt, $4-$7 its end, $8 and $9 the kinds and payloads of its
// events, in order; with a process to record (Outcome.Ran), $10-$15 the
// process as markRunningSQL records it; last, the reads (Outcome.Reads).
type attemptEnd struct {
	update          string
	args            []any
	kinds, payloads []string
}

// endOf is the end o of cur, checked as finishAttempt checks it; nil when
// cur holds that end already.
func endOf(cur store.Attempt, o store.Outcome) (*attemptEnd, error) {
	ref := cur.AttemptRef
	was := cur.State
	o = o.Against(cur)
	ran := o.Ran != nil && cur.State.CanBecome(store.AttemptRunning)
	if noop, err := store.CheckFinish(cur, o, ran); noop || err != nil {
		return nil, err
	}
	var kinds, payloads []string
	args := []any{ref.Run, ref.Task, ref.Number, string(o.State), o.Class, o.ExitCode, o.ErrorTail, nil, nil}
	process := ""
	if ran {
		if cur.State == store.AttemptQueued {
			ev, payload := runningEvent(cur, *o.Ran)
			kinds, payloads = append(kinds, ev.Kind), append(payloads, eventText(payload))
		}
		was = store.AttemptRunning
		a := markRunningArgs(cur, *o.Ran) // run, task, number, pid, lease ms, lease µs, pgid, start, host, boot
		args = append(args, a[3], a[4], a[6], a[7], a[8], a[9])
		process = `started = COALESCE(started, n.now), pid = $10, lease_ms = $11, pgid = $12, proc_start = $13, host = $14, boot_id = $15, `
	}
	kinds = append(kinds, store.EventAttemptFinished)
	payloads = append(payloads, eventText(store.FinishedPayload(o, cur.Token, was)))
	args[7], args[8] = kinds, payloads
	args = append(args, store.ReadsText(o.Reads))
	return &attemptEnd{
		update: `UPDATE attempts SET ` + process + `state = $4, class = $5, exit_code = $6, error_tail = $7, ended = n.now, lease_expiry = NULL,
	reads = $` + fmt.Sprint(len(args)) + ` FROM n WHERE run = $1 AND task = $2 AND number = $3`,
		args:     args,
		kinds:    kinds,
		payloads: payloads,
	}, nil
}

// GetAttempt implements store.Store.
func (s *Store) GetAttempt(ctx context.Context, ref store.AttemptRef) (store.Attempt, error) {
	return getAttempt(ctx, s.read(), ref, false)
}

// Attempts implements store.Store.
func (s *Store) Attempts(ctx context.Context, run string) ([]store.Attempt, error) {
	rows, err := s.read().Query(ctx, `SELECT `+attemptColumns+` FROM attempts WHERE run = $1 ORDER BY task COLLATE "C", number`, run)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanAttempt)
}

// TaskAttempts implements store.Store.
func (s *Store) TaskAttempts(ctx context.Context, resource, task string) ([]store.Attempt, error) {
	rows, err := s.read().Query(ctx, `SELECT `+attemptColumns+` FROM attempts WHERE resource = $1 AND task = $2 ORDER BY token`, resource, task)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanAttempt)
}

// StateID implements store.Store.
func (s *Store) StateID(ctx context.Context) (string, error) {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	if s.stateID != "" {
		return s.stateID, nil
	}
	var id string
	if err := s.read().QueryRow(ctx, `SELECT state_id FROM state_identity`).Scan(&id); err != nil {
		return "", fmt.Errorf("state id: %w", err)
	}
	s.stateID = id
	return id, nil
}

// trailedRow scans an attempt row followed by more columns (a grant's
// validity; a claim's fresh attempt and its task's attempts before).
type trailedRow struct {
	pgx.Row
	more []any
}

func (r trailedRow) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.more...)...) }

// RaiseTokens implements store.Store, durably (synchronous_commit = on): a
// sink adopted by this state refuses every token not above floor.
func (s *Store) RaiseTokens(ctx context.Context, resources []string, floor int64, reason string) error {
	if floor <= 0 || len(resources) == 0 {
		return nil
	}
	for _, res := range resources {
		if res == "" {
			return fmt.Errorf("raise tokens: empty resource")
		}
	}
	return s.txDurable(ctx, func(tx pgx.Tx) error {
		for _, res := range resources {
			if _, err := tx.Exec(ctx, `INSERT INTO tokens (resource, last) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET last = GREATEST(tokens.last, excluded.last)`, res, floor); err != nil {
				return err
			}
		}
		// Tokens above floor may lie in an epoch nobody recorded; record
		// it, so grants there are valid (and a handle's next new epoch is
		// higher still).
		if _, err := tx.Exec(ctx, `UPDATE epochs SET epoch = GREATEST(epoch, $1::bigint / `+epochSpanSQL+`)`, floor); err != nil {
			return err
		}
		return appendEvent(ctx, tx, store.Event{Kind: store.EventTokensRaised}, map[string]any{
			"resources": resources, "floor": floor, "reason": reason})
	})
}

// eventText is store.PayloadText of plain data.
func eventText(payload any) string {
	text, err := store.PayloadText(payload)
	if err != nil {
		panic(err) // only called with plain data, which always encodes (as queue.JSON)
	}
	return text
}
