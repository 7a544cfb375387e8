package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pipec/pipec/runtime/store"
)

// CreateRun implements store.Store. The run's number comes from a counter
// row per (pipeline, interval), taken first: its row lock serializes every
// creation of a run of the interval, so the lease on the interval is judged
// and taken by one creator at a time, and of two runs starting at once
// exactly one gets it. It commits synchronously (see the package doc); a
// session ended under that COMMIT is settled by the run's row (creating).
func (s *Store) CreateRun(ctx context.Context, nr store.NewRun) (store.Run, error) {
	if err := nr.Check(); err != nil {
		return store.Run{}, err
	}
	r, err := s.creating(ctx, func(tx pgx.Tx, ends *txEnds) (store.Run, error) {
		writes := &pgx.Batch{}
		r, n, err := createRun(ctx, tx, ends, nr, writes)
		if err != nil {
			return r, err
		}
		err = sendCreating(ctx, tx, ends, writes, &r, n) // fills r.Created
		return r, err
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("create run: %w", err)
	}
	return r, nil
}

// creating runs create, a pipelined transaction that creates a run (and,
// for a submission, its work) and commits synchronously, and settles a
// session ended under its COMMIT (settled): the run's row, as the INSERT
// returned it (its id and its creation time, both read before the
// COMMIT), is there or not. Made again, the run would be a second one of
// its interval, or refused as busy by the first.
func (s *Store) creating(ctx context.Context, create func(pgx.Tx, *txEnds) (store.Run, error)) (store.Run, error) {
	return settled(ctx, func() (store.Run, bool, error) {
		var r store.Run
		err := s.pipelined(ctx, true, func(tx pgx.Tx, ends *txEnds) error {
			var err error
			r, err = create(tx, ends)
			return err
		})
		return r, r.ID != "" && !r.Created.IsZero(), err
	}, func(r store.Run) (bool, error) {
		var there bool
		err := s.read().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE id = $1 AND created = $2)`, r.ID, r.Created).Scan(&there)
		return there, err
	})
}

// createRun is CreateRun inside a pipelined transaction (txPipelined; pipec
// submit records the run and its work in one): what it decides on is read
// in one round trip, with the BEGIN; its writes are queued on writes (n
// statements, the first the run's insert), which the caller sends with
// its own and the COMMIT, and reads with readCreated. Two round trips for
// a submit, where a statement each took eleven.
func createRun(ctx context.Context, tx pgx.Tx, ends *txEnds, nr store.NewRun, writes *pgx.Batch) (r store.Run, n int, err error) {
	reads := &pgx.Batch{}
	if nr.MaxActive > 0 {
		// Taken before the interval's counter row, always in this order:
		// every creation of a run of the pipeline that counts its slots
		// waits here for the one before it to commit, so the count below
		// (a fresh snapshot under READ COMMITTED) sees it.
		queueLockKey(reads, "run-slots", nr.Pipeline)
	}
	reads.Queue(`INSERT INTO run_seqs (pipeline, interval_key, last) VALUES ($1, $2, 1)
ON CONFLICT (pipeline, interval_key) DO UPDATE SET last = run_seqs.last + 1 RETURNING last`, nr.Pipeline, nr.Interval)
	reads.Queue(`SELECT l.run, l.host, l.pid, l.since, l.expiry, l.expiry > pipec_now()
FROM run_leases l JOIN runs r ON r.id = l.run
WHERE l.pipeline = $1 AND l.interval_key = $2 AND r.state = 'running'`, nr.Pipeline, nr.Interval)
	reads.Queue(runningRunsSQL, nr.Pipeline)
	br, err := sendSkipping(ctx, tx, ends, reads, b2i(nr.MaxActive > 0))
	if err != nil {
		br.Close()
		return r, 0, err
	}
	var seq int
	var holder, host string
	var pid int
	var since, until time.Time
	var live bool
	var running []store.RunningRun
	err = br.QueryRow().Scan(&seq)
	if err == nil {
		err = br.QueryRow().Scan(&holder, &host, &pid, &since, &until, &live)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
	}
	if err == nil {
		running, err = scanRunningRuns(br.Query())
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return r, 0, err
	case holder != "" && live && !(nr.TakeOver != "" && nr.TakeOver == holder):
		return r, 0, &store.RunBusyError{Run: holder, Owner: store.RunOwner{Host: host, PID: pid}, Since: since.UTC(), Expiry: until.UTC()}
	}
	if err := store.CheckRunSlots(nr, running); err != nil {
		return r, 0, err
	}
	r = store.Run{
		ID:            fmt.Sprintf("%s/%s/r%d", nr.Pipeline, nr.Interval, seq),
		Pipeline:      nr.Pipeline,
		Interval:      nr.Interval,
		IntervalStart: nr.IntervalStart.UTC(),
		IntervalEnd:   nr.IntervalEnd.UTC(),
		CodeVersion:   nr.CodeVersion,
		PlanDigest:    nr.PlanDigest,
		TaskDigests:   nr.TaskDigests,
		Forced:        nr.Forced,
		State:         store.RunRunning,
	}
	digests, err := store.TaskDigestsText(nr.TaskDigests)
	if err != nil {
		return r, 0, err
	}
	writes.Queue(`INSERT INTO runs (id, pipeline, interval_key, seq, interval_start, interval_end, code_version, plan_digest, task_digests, forced, state, created)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'running', pipec_now()) RETURNING created`,
		r.ID, r.Pipeline, r.Interval, seq, nullTime(nr.IntervalStart), nullTime(nr.IntervalEnd), r.CodeVersion, r.PlanDigest, digests, nr.Forced)
	payload := store.RunCreatedPayload(r)
	if nr.Lease > 0 {
		// From the run's creation time, as the insert before it set it.
		writes.Queue(`INSERT INTO run_leases (pipeline, interval_key, run, host, pid, since, expiry)
SELECT $1, $2, $3, $4, $5, c.created, c.created + $6::bigint * interval '1 microsecond' FROM runs c WHERE c.id = $3
ON CONFLICT (pipeline, interval_key) DO UPDATE SET run = excluded.run, host = excluded.host, pid = excluded.pid,
	since = excluded.since, expiry = excluded.expiry`,
			r.Pipeline, r.Interval, r.ID, nr.Owner.Host, nr.Owner.PID, micros(nr.Lease))
		payload["owner_host"], payload["owner_pid"] = nr.Owner.Host, nr.Owner.PID
		if holder != "" {
			payload["took_over"] = holder // its lease had expired
		}
	}
	text, err := store.PayloadText(payload)
	if err != nil {
		return r, 0, err
	}
	writes.Queue(insertEventSQL, r.ID, store.EventRunCreated, "", 0, text)
	return r, writes.Len(), nil
}

// readCreated reads the results of createRun's n writes from br: the
// first is the run's creation time.
func readCreated(br pgx.BatchResults, r *store.Run, n int) error {
	var created time.Time
	if err := br.QueryRow().Scan(&created); err != nil {
		return err
	}
	r.Created = created.UTC()
	for range n - 1 {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return nil
}

// runningRuns reads the pipeline's running runs with their leases (judged
// on the server's clock) and submissions, for store.CheckRunSlots.
// runningRunsSQL is their query, $1 the pipeline; scanRunningRuns reads it.
const runningRunsSQL = `SELECT r.id, r.interval_key, l.run IS NOT NULL, COALESCE(l.host, ''), COALESCE(l.pid, 0),
	l.since, COALESCE(l.expiry > pipec_now(), false), EXISTS (SELECT 1 FROM submissions s WHERE s.run = r.id)
FROM runs r LEFT JOIN run_leases l ON l.run = r.id
WHERE r.pipeline = $1 AND r.state = 'running'`

func scanRunningRuns(rows pgx.Rows, err error) ([]store.RunningRun, error) {
	if err != nil {
		return nil, err
	}
	return collect(rows, func(row pgx.Row) (store.RunningRun, error) {
		var r store.RunningRun
		var since *time.Time
		err := row.Scan(&r.Run, &r.Interval, &r.Leased, &r.Owner.Host, &r.Owner.PID, &since, &r.Live, &r.Submitted)
		r.Since = timeOf(since)
		return r, err
	})
}

// RenewRunLease implements store.Store: one conditional update, so a run
// whose lease was taken over can never extend the new holder's.
func (s *Store) RenewRunLease(ctx context.Context, id string, lease time.Duration) error {
	if lease <= 0 {
		return fmt.Errorf("renew run lease of %q: lease must be positive", id)
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE run_leases SET expiry = pipec_now() + $2::bigint * interval '1 microsecond' WHERE run = $1`, id, micros(lease))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("renew run lease of %q: the run no longer holds its interval: %w", id, store.ErrLeaseLost)
		}
		return nil
	})
}

// RunLeases implements store.Store, judged on the server's clock (in a
// transaction, where a test's clock applies).
func (s *Store) RunLeases(ctx context.Context, pipeline string) ([]store.RunLease, error) {
	var out []store.RunLease
	err := s.tx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT l.run, l.interval_key, l.host, l.pid, l.since, l.expiry, l.expiry > pipec_now()
FROM run_leases l JOIN runs r ON r.id = l.run
WHERE l.pipeline = $1 AND r.state = 'running' ORDER BY l.interval_key COLLATE "C"`, pipeline)
		if err != nil {
			return err
		}
		out, err = collect(rows, func(row pgx.Row) (store.RunLease, error) {
			var l store.RunLease
			err := row.Scan(&l.Run, &l.Interval, &l.Owner.Host, &l.Owner.PID, &l.Since, &l.Expiry, &l.Live)
			l.Since, l.Expiry = l.Since.UTC(), l.Expiry.UTC()
			return l, err
		})
		return err
	})
	return out, err
}

// nullTime stores the zero time as NULL.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

const runColumns = `id, pipeline, interval_key, interval_start, interval_end, code_version, plan_digest, state, created, finished, cancelled, forced`

func scanRun(sc pgx.Row, more ...any) (store.Run, error) {
	var r store.Run
	var start, end, finished *time.Time
	var created time.Time
	var state string
	if err := sc.Scan(append([]any{&r.ID, &r.Pipeline, &r.Interval, &start, &end, &r.CodeVersion, &r.PlanDigest, &state, &created, &finished, &r.Cancelled, &r.Forced}, more...)...); err != nil {
		return store.Run{}, err
	}
	r.IntervalStart, r.IntervalEnd = timeOf(start), timeOf(end)
	r.State = store.RunState(state)
	if r.Cancelled != "" {
		r.State = store.RunCancelled
	}
	r.Created, r.Finished = created.UTC(), timeOf(finished)
	return r, nil
}

// GetRun implements store.Store.
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, error) {
	var digests string // GetRun alone reads them: a large plan's are large
	r, err := scanRun(s.read().QueryRow(ctx, `SELECT `+runColumns+`, task_digests FROM runs WHERE id = $1`, id), &digests)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Run{}, fmt.Errorf("run %q: %w", id, store.ErrNotFound)
	}
	if err == nil {
		r.TaskDigests, err = store.ParseTaskDigests(digests)
	}
	return r, err
}

// ListRuns implements store.Store.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	var where []string
	var args []any
	if f.Pipeline != "" {
		args = append(args, f.Pipeline)
		where = append(where, fmt.Sprintf("pipeline = $%d", len(args)))
	}
	if f.Interval != "" {
		args = append(args, f.Interval)
		where = append(where, fmt.Sprintf("interval_key = $%d", len(args)))
	}
	q := `SELECT ` + runColumns + ` FROM runs`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created, pipeline COLLATE \"C\", interval_key COLLATE \"C\", seq"
	rows, err := s.read().Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r pgx.Row) (store.Run, error) { return scanRun(r) })
}

// collect scans every row with scan.
func collect[T any](rows pgx.Rows, scan func(pgx.Row) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// lockRun reads a run's state under a row lock (FOR UPDATE, or FOR SHARE
// when share), so the state cannot change before the transaction ends.
func lockRun(ctx context.Context, tx pgx.Tx, id string, share bool) (store.RunState, error) {
	mode := "UPDATE"
	if share {
		mode = "SHARE"
	}
	var cur string
	err := tx.QueryRow(ctx, `SELECT state FROM runs WHERE id = $1 FOR `+mode, id).Scan(&cur)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("run %q: %w", id, store.ErrNotFound)
	}
	return store.RunState(cur), err
}

// TakeRetry implements store.Store: the count of first attempts, then one
// conditional update, which concurrent takers pass one at a time.
//
// A session ended under its COMMIT (a restart) runs it again, whether or
// not the first committed: a retry counted twice leaves the run's budget
// one retry shorter, where failing the count would fail the run; a budget
// bounds a storm from above, and is never spent later than it should be.
func (s *Store) TakeRetry(ctx context.Context, run string, allowed func(first int) int) (store.RetryCount, error) {
	var c store.RetryCount
	err := s.runRepeatable(ctx, false, func(tx pgx.Tx) error {
		c = store.RetryCount{}
		if err := tx.QueryRow(ctx, `SELECT count(DISTINCT task) FROM attempts WHERE run = $1`, run).Scan(&c.First); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `UPDATE runs SET retries = retries + 1 WHERE id = $1 AND retries < $2 RETURNING retries`,
			run, allowed(c.First)).Scan(&c.Used)
		if err == nil {
			c.Taken = true
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		err = tx.QueryRow(ctx, `SELECT retries FROM runs WHERE id = $1`, run).Scan(&c.Used)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("run %q: %w", run, store.ErrNotFound)
		}
		return err
	})
	if err != nil {
		return store.RetryCount{}, fmt.Errorf("take a retry of run %q: %w", run, err)
	}
	return c, nil
}

// FinishRun implements store.Store; a synchronous commit (see the package
// doc): a dispatcher that ended the run once may not end it again.
func (s *Store) FinishRun(ctx context.Context, id string, state store.RunState) error {
	if state != store.RunSucceeded && state != store.RunFailed {
		return fmt.Errorf("finish run %q: state %q is not final", id, state)
	}
	// Repeatable: the same end of an ended run is a no-op.
	return s.runRepeatable(ctx, true, func(tx pgx.Tx) error {
		cur, err := lockRun(ctx, tx, id, false)
		if err != nil {
			return err
		}
		if cur == state {
			return nil
		}
		if cur != store.RunRunning {
			return fmt.Errorf("finish run %q as %s: already %s: %w", id, state, cur, store.ErrConflict)
		}
		if err := changed(tx.Exec(ctx, `UPDATE runs SET state = $1, finished = pipec_now() WHERE id = $2 AND state = 'running'`, string(state), id)); err != nil {
			return fmt.Errorf("finish run %q: %w", id, err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM run_leases WHERE run = $1`, id); err != nil {
			return err
		}
		return appendEvent(ctx, tx, store.Event{Run: id, Kind: store.EventRunFinished}, map[string]any{"state": string(state)})
	})
}

// CancelRun implements store.Store; a synchronous commit, as FinishRun.
// Repeatable: a run cancelled already with the same words is this
// cancellation, made by a try whose COMMIT's answer a restart cut off.
func (s *Store) CancelRun(ctx context.Context, id, reason, by string) (store.Run, error) {
	why := store.CancelledBy(by, reason)
	err := s.runRepeatable(ctx, true, func(tx pgx.Tx) error {
		cur, err := lockRun(ctx, tx, id, false)
		if err != nil {
			return err
		}
		if cur == store.RunFailed { // a cancelled run is stored failed
			var was string
			if err := tx.QueryRow(ctx, `SELECT cancelled FROM runs WHERE id = $1`, id).Scan(&was); err != nil {
				return err
			}
			if was == why {
				return nil
			}
		}
		if cur != store.RunRunning {
			return fmt.Errorf("run %q is %s already: %w", id, cur, store.ErrConflict)
		}
		if err := changed(tx.Exec(ctx, `UPDATE runs SET state = 'failed', finished = pipec_now(), cancelled = $2 WHERE id = $1 AND state = 'running'`, id, why)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM run_leases WHERE run = $1`, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE work SET state = 'not_run', reason = $2, worker = '', claim_expiry = NULL
WHERE run = $1 AND state IN ('blocked', 'ready', 'claimed')`, id, "the run was cancelled "+why); err != nil {
			return err
		}
		return appendEvent(ctx, tx, store.Event{Run: id, Kind: store.EventRunCancelled}, map[string]any{"by": by, "reason": reason})
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("cancel run %q: %w", id, err)
	}
	return s.GetRun(ctx, id)
}

// AbandonRun implements store.Store.
func (s *Store) AbandonRun(ctx context.Context, id, reason string) ([]store.Attempt, error) {
	var out []store.Attempt
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out = nil
		cur, err := lockRun(ctx, tx, id, false)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `UPDATE attempts SET state = 'unknown'
WHERE run = $1 AND state IN ('queued', 'running') RETURNING `+attemptColumns, id)
		if err != nil {
			return err
		}
		marked, err := collect(rows, scanAttempt)
		if err != nil {
			return err
		}
		sortAttempts(marked)
		for _, a := range marked {
			if err := appendEvent(ctx, tx, store.Event{Run: a.Run, Kind: store.EventAttemptUnknown, Task: a.Task, Attempt: a.Number},
				map[string]any{"token": a.Token, "reason": reason}); err != nil {
				return err
			}
		}
		out = marked
		if cur == store.RunRunning {
			if _, err := tx.Exec(ctx, `UPDATE runs SET state = 'failed', finished = pipec_now() WHERE id = $1 AND state = 'running'`, id); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM run_leases WHERE run = $1`, id); err != nil {
			return err
		}
		return appendEvent(ctx, tx, store.Event{Run: id, Kind: store.EventRunAbandoned}, map[string]any{"reason": reason, "was": string(cur)})
	})
	if err != nil {
		return nil, fmt.Errorf("abandon run: %w", err)
	}
	return out, nil
}

// AppendEvent implements store.Store.
func (s *Store) AppendEvent(ctx context.Context, e store.Event) (int64, error) {
	if e.Kind == "" {
		return 0, fmt.Errorf("append event: kind is required")
	}
	if len(e.Payload) > 0 && !json.Valid(e.Payload) {
		return 0, fmt.Errorf("append event %s: payload is not valid JSON", e.Kind)
	}
	// A session ended under the COMMIT is settled by the sequence number
	// the INSERT returned (settled): the log has no gap, nor the event
	// twice.
	return settled(ctx, func() (int64, bool, error) {
		var seq int64
		err := s.tx(ctx, func(tx pgx.Tx) error {
			seq = 0
			return tx.QueryRow(ctx, insertEventSQL+` RETURNING seq`,
				e.Run, e.Kind, e.Task, e.Attempt, string(e.Payload)).Scan(&seq)
		})
		return seq, seq > 0, err
	}, func(seq int64) (bool, error) {
		var there bool
		err := s.read().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE seq = $1 AND run = $2 AND kind = $3)`,
			seq, e.Run, e.Kind).Scan(&there)
		return there, err
	})
}

// insertEventSQL appends an event: $1 run, $2 kind, $3 task, $4 attempt,
// $5 payload.
var insertEventSQL = `INSERT INTO events (run, time, kind, task, attempt, payload) VALUES ($1, ` + eventNowSQL + `, $2, $3, $4, $5)`

// eventNowSQL is the time of an event written now.
var eventNowSQL = eventTime("pipec_now()")

// eventTime is the time of an event written at now (SQL of the store's
// clock): now, or the time of the event logged last when that is later
// (the server's clock stepped back), so that an event's time never goes
// back against its sequence number. Every statement that writes an event
// takes its time from here; a statement's events read the last time once
// (an uncorrelated subquery), before any of them is written.
func eventTime(now string) string { return `GREATEST(` + now + `, ` + lastEventTimeSQL + `)` }

const lastEventTimeSQL = `(SELECT time FROM events ORDER BY seq DESC LIMIT 1)`

// appendEvent records an event inside a transaction; payload is marshalled
// (store.PayloadText).
func appendEvent(ctx context.Context, tx pgx.Tx, e store.Event, payload any) error {
	text, err := store.PayloadText(payload)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, insertEventSQL,
		e.Run, e.Kind, e.Task, e.Attempt, text)
	return err
}

// Events implements store.Store.
func (s *Store) Events(ctx context.Context, run string) ([]store.Event, error) {
	rows, err := s.read().Query(ctx, `SELECT seq, run, time, kind, task, attempt, payload FROM events WHERE run = $1 ORDER BY seq`, run)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r pgx.Row) (store.Event, error) {
		var e store.Event
		var t time.Time
		var payload string
		if err := r.Scan(&e.Seq, &e.Run, &t, &e.Kind, &e.Task, &e.Attempt, &payload); err != nil {
			return store.Event{}, err
		}
		e.Time = t.UTC()
		if payload != "" {
			e.Payload = json.RawMessage(payload)
		}
		return e, nil
	})
}
