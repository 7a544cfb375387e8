package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pipec/pipec/runtime/clock"
	"github.com/pipec/pipec/runtime/store"
)

// CreateRun implements Store.
func (s *Store) CreateRun(ctx context.Context, nr store.NewRun) (store.Run, error) {
	if err := nr.Check(); err != nil {
		return store.Run{}, err
	}
	var r store.Run
	err := s.write(ctx, normal, func(ctx context.Context, tx *wtx) error {
		var err error
		r, err = s.createRun(ctx, tx, nr)
		return err
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("create run: %w", err)
	}
	return r, nil
}

// createRun is CreateRun inside a write transaction (also the queue's
// Submit, which records the run and its work in one).
func (s *Store) createRun(ctx context.Context, tx *wtx, nr store.NewRun) (store.Run, error) {
	var r store.Run
	err := func() error {
		now := s.now()
		// The interval's lease, judged and taken in this transaction: of two
		// runs starting at once exactly one gets it.
		var holder, host string
		var pid int
		var since, until, untilLease int64
		var untilBoot string
		err := tx.QueryRowContext(ctx, `SELECT l.run, l.host, l.pid, l.since, l.expiry, l.expiry_boot, l.expiry_until
FROM run_leases l JOIN runs r ON r.id = l.run
WHERE l.pipeline = ? AND l.interval_key = ? AND r.state = 'running'`, nr.Pipeline, nr.Interval).Scan(&holder, &host, &pid, &since, &until,
			&untilBoot, &untilLease)
		// Judged on the lease clock (it does not step); until is the wall
		// clock's estimate, for the message.
		live := err == nil && !clock.Expired(clock.Reading{Boot: untilBoot, Nanos: untilLease}, s.lease())
		switch {
		case live && !(nr.TakeOver != "" && nr.TakeOver == holder):
			return &store.RunBusyError{Run: holder, Owner: store.RunOwner{Host: host, PID: pid}, Since: timeOf(since), Expiry: timeOf(until)}
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return err
		}
		// The pipeline's run slots, judged under the same write lock: every
		// creation of a run on this file is serialized by it.
		running, err := s.runningRuns(ctx, tx, nr.Pipeline)
		if err != nil {
			return err
		}
		if err := store.CheckRunSlots(nr, running); err != nil {
			return err
		}
		var seq int
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) + 1 FROM runs WHERE pipeline = ? AND interval_key = ?`,
			nr.Pipeline, nr.Interval).Scan(&seq); err != nil {
			return err
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
			Created:       timeOf(now),
		}
		digests, err := store.TaskDigestsText(nr.TaskDigests)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO runs (id, pipeline, interval_key, seq, interval_start, interval_end, code_version, plan_digest, task_digests, forced, state, created)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Pipeline, r.Interval, seq, nanos(nr.IntervalStart), nanos(nr.IntervalEnd), r.CodeVersion, r.PlanDigest, digests, nr.Forced,
			string(r.State), now); err != nil {
			return err
		}
		payload := store.RunCreatedPayload(r)
		if nr.Lease > 0 {
			leaseBoot, leaseUntil := s.leaseUntil(nr.Lease)
			if _, err := tx.ExecContext(ctx, `INSERT INTO run_leases (pipeline, interval_key, run, host, pid, since, expiry, expiry_boot, expiry_until)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (pipeline, interval_key) DO UPDATE SET run = excluded.run, host = excluded.host, pid = excluded.pid,
	since = excluded.since, expiry = excluded.expiry, expiry_boot = excluded.expiry_boot, expiry_until = excluded.expiry_until`,
				r.Pipeline, r.Interval, r.ID, nr.Owner.Host, nr.Owner.PID, now, expiry(now, nr.Lease), leaseBoot, leaseUntil); err != nil {
				return err
			}
			payload["owner_host"], payload["owner_pid"] = nr.Owner.Host, nr.Owner.PID
			if holder != "" {
				payload["took_over"] = holder // its lease had expired
			}
		}
		return appendEvent(ctx, tx, now, store.Event{Run: r.ID, Kind: store.EventRunCreated}, payload)
	}()
	return r, err
}

// runningRuns reads the pipeline's running runs with their leases and
// submissions, for CheckRunSlots.
func (s *Store) runningRuns(ctx context.Context, tx *wtx, pipeline string) ([]store.RunningRun, error) {
	rows, err := tx.QueryContext(ctx, `SELECT r.id, r.interval_key, l.run IS NOT NULL, COALESCE(l.host, ''), COALESCE(l.pid, 0),
	COALESCE(l.since, 0), COALESCE(l.expiry_boot, ''), COALESCE(l.expiry_until, 0), s.run IS NOT NULL
FROM runs r LEFT JOIN run_leases l ON l.run = r.id LEFT JOIN submissions s ON s.run = r.id
WHERE r.pipeline = ? AND r.state = 'running'`, pipeline)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.RunningRun
	for rows.Next() {
		var r store.RunningRun
		var since, untilLease int64
		var untilBoot string
		if err := rows.Scan(&r.Run, &r.Interval, &r.Leased, &r.Owner.Host, &r.Owner.PID, &since, &untilBoot, &untilLease, &r.Submitted); err != nil {
			return nil, err
		}
		r.Since = timeOf(since)
		r.Live = r.Leased && !clock.Expired(clock.Reading{Boot: untilBoot, Nanos: untilLease}, s.lease())
		out = append(out, r)
	}
	return out, rows.Err()
}

const runColumns = `id, pipeline, interval_key, interval_start, interval_end, code_version, plan_digest, state, created, finished, cancelled, forced`

func scanRun(sc interface{ Scan(...any) error }, more ...any) (store.Run, error) {
	var r store.Run
	var start, end, created, finished int64
	var state string
	if err := sc.Scan(append([]any{&r.ID, &r.Pipeline, &r.Interval, &start, &end, &r.CodeVersion, &r.PlanDigest, &state, &created, &finished, &r.Cancelled, &r.Forced}, more...)...); err != nil {
		return store.Run{}, err
	}
	r.IntervalStart, r.IntervalEnd = timeOf(start), timeOf(end)
	r.State = store.RunState(state)
	if r.Cancelled != "" {
		r.State = store.RunCancelled
	}
	r.Created, r.Finished = timeOf(created), timeOf(finished)
	return r, nil
}

// GetRun implements Store.
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, error) {
	var digests string // GetRun alone reads them: a large plan's are large
	r, err := scanRun(s.queryRow(ctx, `SELECT `+runColumns+`, task_digests FROM runs WHERE id = ?`, id), &digests)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Run{}, fmt.Errorf("run %q: %w", id, store.ErrNotFound)
	}
	if err == nil {
		r.TaskDigests, err = store.ParseTaskDigests(digests)
	}
	return r, err
}

// ListRuns implements Store.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	var where []string
	var args []any
	if f.Pipeline != "" {
		where = append(where, "pipeline = ?")
		args = append(args, f.Pipeline)
	}
	if f.Interval != "" {
		where = append(where, "interval_key = ?")
		args = append(args, f.Interval)
	}
	q := `SELECT ` + runColumns + ` FROM runs`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created, pipeline, interval_key, seq"
	// Prepared (one of four texts): every run's start lists its interval's runs.
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// FinishRun implements Store.
func (s *Store) FinishRun(ctx context.Context, id string, state store.RunState) error {
	if state != store.RunSucceeded && state != store.RunFailed {
		return fmt.Errorf("finish run %q: state %q is not final", id, state)
	}
	return s.write(ctx, normal, func(ctx context.Context, tx *wtx) error {
		var cur string
		err := tx.QueryRowContext(ctx, `SELECT state FROM runs WHERE id = ?`, id).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("run %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if store.RunState(cur) == state {
			return nil
		}
		if store.RunState(cur) != store.RunRunning {
			return fmt.Errorf("finish run %q as %s: already %s: %w", id, state, cur, store.ErrConflict)
		}
		now := s.now()
		res, err := tx.ExecContext(ctx, `UPDATE runs SET state = ?, finished = ? WHERE id = ? AND state = 'running'`, string(state), now, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("finish run %q: it changed under the update (%v): %w", id, err, store.ErrConflict)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM run_leases WHERE run = ?`, id); err != nil {
			return err
		}
		return appendEvent(ctx, tx, now, store.Event{Run: id, Kind: store.EventRunFinished}, map[string]any{"state": string(state)})
	})
}

// CancelRun implements Store.
func (s *Store) CancelRun(ctx context.Context, id, reason, by string) (store.Run, error) {
	why := store.CancelledBy(by, reason)
	err := s.write(ctx, durable, func(ctx context.Context, tx *wtx) error {
		now := s.now()
		res, err := tx.ExecContext(ctx, `UPDATE runs SET state = 'failed', finished = ?, cancelled = ? WHERE id = ? AND state = 'running'`, now, why, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return runNotRunning(ctx, tx, id)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM run_leases WHERE run = ?`, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE work SET state = 'not_run', reason = ?, worker = '', claim_boot = '', claim_until = 0
WHERE run = ? AND state IN ('blocked', 'ready', 'claimed')`, "the run was cancelled "+why, id); err != nil {
			return err
		}
		return appendEvent(ctx, tx, now, store.Event{Run: id, Kind: store.EventRunCancelled}, map[string]any{"by": by, "reason": reason})
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("cancel run %q: %w", id, err)
	}
	return s.GetRun(ctx, id)
}

// TakeRetry implements Store: the count of first attempts, then one
// conditional update, in one write transaction.
func (s *Store) TakeRetry(ctx context.Context, run string, allowed func(first int) int) (store.RetryCount, error) {
	var c store.RetryCount
	err := s.write(ctx, normal, func(ctx context.Context, tx *wtx) error {
		c = store.RetryCount{}
		if err := tx.QueryRowContext(ctx, `SELECT count(DISTINCT task) FROM attempts WHERE run = ?`, run).Scan(&c.First); err != nil {
			return err
		}
		err := tx.QueryRowContext(ctx, `UPDATE runs SET retries = retries + 1 WHERE id = ? AND retries < ? RETURNING retries`,
			run, allowed(c.First)).Scan(&c.Used)
		if err == nil {
			c.Taken = true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		err = tx.QueryRowContext(ctx, `SELECT retries FROM runs WHERE id = ?`, run).Scan(&c.Used)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("run %q: %w", run, store.ErrNotFound)
		}
		return err
	})
	if err != nil {
		return store.RetryCount{}, fmt.Errorf("take a retry of run %q: %w", run, err)
	}
	return c, nil
}

// runNotRunning says why a run that should be running is not.
func runNotRunning(ctx context.Context, tx *wtx, id string) error {
	var cur string
	err := tx.QueryRowContext(ctx, `SELECT CASE WHEN cancelled <> '' THEN 'cancelled' ELSE state END FROM runs WHERE id = ?`, id).Scan(&cur)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("run %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("run %q is %s already: %w", id, cur, store.ErrConflict)
}

// RenewRunLease implements Store: one conditional update, so a run whose
// lease was taken over can never extend the new holder's.
func (s *Store) RenewRunLease(ctx context.Context, id string, lease time.Duration) error {
	if lease <= 0 {
		return fmt.Errorf("renew run lease of %q: lease must be positive", id)
	}
	return s.write(ctx, normal, func(ctx context.Context, tx *wtx) error {
		leaseBoot, leaseUntil := s.leaseUntil(lease)
		res, err := tx.ExecContext(ctx, `UPDATE run_leases SET expiry = ?, expiry_boot = ?, expiry_until = ? WHERE run = ?`,
			expiry(s.now(), lease), leaseBoot, leaseUntil, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("renew run lease of %q: the run no longer holds its interval: %w", id, store.ErrLeaseLost)
		}
		return nil
	})
}

// RunLeases implements Store.
func (s *Store) RunLeases(ctx context.Context, pipeline string) ([]store.RunLease, error) {
	rows, err := s.query(ctx, `SELECT l.run, l.interval_key, l.host, l.pid, l.since, l.expiry, l.expiry_boot, l.expiry_until
FROM run_leases l JOIN runs r ON r.id = l.run
WHERE l.pipeline = ? AND r.state = 'running' ORDER BY l.interval_key`, pipeline)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.RunLease
	for rows.Next() {
		var l store.RunLease
		var since, until, untilLease int64
		var untilBoot string
		if err := rows.Scan(&l.Run, &l.Interval, &l.Owner.Host, &l.Owner.PID, &since, &until, &untilBoot, &untilLease); err != nil {
			return nil, err
		}
		l.Since, l.Expiry = timeOf(since), timeOf(until)
		l.Live = !clock.Expired(clock.Reading{Boot: untilBoot, Nanos: untilLease}, s.lease())
		out = append(out, l)
	}
	return out, rows.Err()
}

// AbandonRun implements Store.
func (s *Store) AbandonRun(ctx context.Context, id, reason string) ([]store.Attempt, error) {
	var out []store.Attempt
	err := s.write(ctx, normal, func(ctx context.Context, tx *wtx) error {
		out = nil
		var cur string
		err := tx.QueryRowContext(ctx, `SELECT state FROM runs WHERE id = ?`, id).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("run %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+attemptColumns+` FROM attempts
WHERE run = ? AND state IN ('queued', 'running') ORDER BY task, number`, id)
		if err != nil {
			return err
		}
		for rows.Next() {
			a, err := scanAttempt(rows)
			if err != nil {
				rows.Close()
				return err
			}
			out = append(out, a)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		now := s.now()
		for i, a := range out {
			if _, err := tx.ExecContext(ctx, `UPDATE attempts SET state = 'unknown' WHERE run = ? AND task = ? AND number = ? AND state = ?`,
				a.Run, a.Task, a.Number, string(a.State)); err != nil {
				return err
			}
			if err := appendEvent(ctx, tx, now, store.Event{Run: a.Run, Kind: store.EventAttemptUnknown, Task: a.Task, Attempt: a.Number},
				map[string]any{"token": a.Token, "reason": reason}); err != nil {
				return err
			}
			out[i].State = store.AttemptUnknown
		}
		if store.RunState(cur) == store.RunRunning {
			if _, err := tx.ExecContext(ctx, `UPDATE runs SET state = 'failed', finished = ? WHERE id = ? AND state = 'running'`, now, id); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM run_leases WHERE run = ?`, id); err != nil {
			return err
		}
		return appendEvent(ctx, tx, now, store.Event{Run: id, Kind: store.EventRunAbandoned}, map[string]any{"reason": reason, "was": cur})
	})
	if err != nil {
		return nil, fmt.Errorf("abandon run: %w", err)
	}
	return out, nil
}

// AppendEvent implements Store.
func (s *Store) AppendEvent(ctx context.Context, e store.Event) (int64, error) {
	if e.Kind == "" {
		return 0, fmt.Errorf("append event: kind is required")
	}
	if len(e.Payload) > 0 && !json.Valid(e.Payload) {
		return 0, fmt.Errorf("append event %s: payload is not valid JSON", e.Kind)
	}
	var seq int64
	err := s.write(ctx, normal, func(ctx context.Context, tx *wtx) error {
		res, err := tx.ExecContext(ctx, insertEvent, e.Run, s.now(), e.Kind, e.Task, e.Attempt, string(e.Payload))
		if err != nil {
			return err
		}
		seq, err = res.LastInsertId()
		return err
	})
	return seq, err
}

// appendEvent records an event inside a transaction; payload is marshalled
// (store.PayloadText).
func appendEvent(ctx context.Context, tx *wtx, now int64, e store.Event, payload any) error {
	text, err := store.PayloadText(payload)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, insertEvent, e.Run, now, e.Kind, e.Task, e.Attempt, text)
	return err
}

// eventRow is one event for appendEvents.
type eventRow struct {
	e       store.Event
	payload any
}

// appendEvents appends two events at once, in order, in one statement.
func appendEvents(ctx context.Context, tx *wtx, now int64, a, b eventRow) error {
	var args [12]any
	for i, r := range [2]eventRow{a, b} {
		text, err := store.PayloadText(r.payload)
		if err != nil {
			return err
		}
		copy(args[i*6:], []any{r.e.Run, now, r.e.Kind, r.e.Task, r.e.Attempt, text})
	}
	_, err := tx.ExecContext(ctx, insertTwoEvents, args[:]...)
	return err
}

// insertTwoEvents is insertEvent for two events: both rows take the time
// the first would (they share now, and the second follows the first).
const insertTwoEvents = `INSERT INTO events (run, time, kind, task, attempt, payload)
VALUES (?1, MAX(?2, COALESCE((SELECT time FROM events ORDER BY seq DESC LIMIT 1), 0)), ?3, ?4, ?5, ?6),
	(?7, MAX(?8, COALESCE((SELECT time FROM events ORDER BY seq DESC LIMIT 1), 0)), ?9, ?10, ?11, ?12)`

// insertEvent appends an event at the given time, or at the log's last
// time if the clock stepped back: writes are serialized, so an event's
// time never goes backwards against its sequence number.
const insertEvent = `INSERT INTO events (run, time, kind, task, attempt, payload)
VALUES (?1, MAX(?2, COALESCE((SELECT time FROM events ORDER BY seq DESC LIMIT 1), 0)), ?3, ?4, ?5, ?6)`

// Events implements Store: the whole log, which is the log after seq 0 (seq
// is the rowid, so the first event has seq 1).
func (s *Store) Events(ctx context.Context, run string) ([]store.Event, error) {
	return s.EventsAfter(ctx, run, 0)
}
