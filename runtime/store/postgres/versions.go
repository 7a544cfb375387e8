package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

const versionColumns = `id, pipeline, artifact, interval_key, digest, run, task, attempt, token, code_version, location, state, reason, created`

func scanVersion(sc pgx.Row) (store.Version, error) {
	var v store.Version
	var state string
	var created time.Time
	if err := sc.Scan(&v.ID, &v.Pipeline, &v.Artifact, &v.Interval, &v.Digest, &v.Run, &v.Task, &v.Attempt, &v.Token, &v.CodeVersion,
		&v.Location, &state, &v.Reason, &created); err != nil {
		return store.Version{}, err
	}
	v.State = store.VersionState(state)
	v.Created = created.UTC()
	return v, nil
}

func getVersion(ctx context.Context, q queryer, id int64, lock bool) (store.Version, error) {
	sql := `SELECT ` + versionColumns + ` FROM versions WHERE id = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	v, err := scanVersion(q.QueryRow(ctx, sql, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Version{}, fmt.Errorf("version %d: %w", id, store.ErrNotFound)
	}
	return v, err
}

// RecordVersion implements store.Store. The token and code_version are
// copied from the attempt and its run inside the INSERT, so a version always
// carries the token of the attempt that produced it; a repeated record (the
// unique key) returns the existing row.
func (s *Store) RecordVersion(ctx context.Context, v store.Version) (store.Version, error) {
	if err := v.CheckRecord(); err != nil {
		return store.Version{}, err
	}
	var out store.Version
	inserted := false
	err := s.txOne(ctx, false, func(rows pgx.Rows) error {
		if !rows.Next() {
			return nil
		}
		var err error
		out, err = scanVersion(rows)
		inserted = err == nil
		return err
	}, recordVersionSQL, v.Artifact, v.Interval, v.Digest, v.Run, v.Task, v.Attempt, v.Location,
		store.EventVersionRecorded, queue.JSON(v.Label()))
	if err == nil && !inserted {
		// Either the version exists already or the attempt does not.
		out, err = scanVersion(s.read().QueryRow(ctx, `SELECT `+versionColumns+` FROM versions
WHERE artifact = $1 AND interval_key = $2 AND digest = $3 AND run = $4 AND task = $5 AND attempt = $6`,
			v.Artifact, v.Interval, v.Digest, v.Run, v.Task, v.Attempt))
		if errors.Is(err, pgx.ErrNoRows) {
			err = fmt.Errorf("attempt %s: %w", store.AttemptRef{Run: v.Run, Task: v.Task, Number: v.Attempt}, store.ErrNotFound)
		}
	}
	if err != nil {
		return store.Version{}, fmt.Errorf("record version: %w", err)
	}
	return out, nil
}

// recordVersionSQL is RecordVersion's one statement: the version ($1
// artifact, $2 interval, $3 digest, $7 location) of attempt $4 $5 $6,
// staged with the attempt's token and its run's code version, and its
// event (kind $8) with the payload appendEvent would write, the label ($9)
// quoted in Go: {"label":…,"token":…,"version":…}. No row when the version
// was recorded before or the attempt does not exist.
var recordVersionSQL = `WITH n AS (SELECT pipec_now() AS now), v AS (
	INSERT INTO versions (pipeline, artifact, interval_key, digest, run, task, attempt, token, code_version, location, state, created)
	SELECT r.pipeline, $1, $2, $3, a.run, a.task, a.number, a.token, r.code_version, $7, 'staged', n.now
	FROM attempts a JOIN runs r ON r.id = a.run, n
	WHERE a.run = $4 AND a.task = $5 AND a.number = $6
	ON CONFLICT (artifact, interval_key, digest, run, task, attempt) DO NOTHING
	RETURNING ` + versionColumns + `
), e AS (
	INSERT INTO events (run, time, kind, task, attempt, payload)
	SELECT v.run, ` + eventTime("n.now") + `, $8, v.task, v.attempt,
		'{"label":' || $9::text || ',"token":' || v.token || ',"version":' || v.id || '}'
	FROM v, n
)
SELECT ` + versionColumns + ` FROM v`

// AcceptVersion implements store.Store.
func (s *Store) AcceptVersion(ctx context.Context, id int64) error {
	return s.audit(ctx, id, store.VersionAccepted, "")
}

// RejectVersion implements store.Store.
func (s *Store) RejectVersion(ctx context.Context, id int64, reason string) error {
	return s.audit(ctx, id, store.VersionRejected, reason)
}

// audit moves a staged version to its audit verdict; a verdict is final.
// A staged version (every version its producer audits) moves in one round
// trip (auditSQL); any other is read first, under its lock. An acceptance
// commits synchronously (see the package doc).
func (s *Store) audit(ctx context.Context, id int64, to store.VersionState, reason string) error {
	durable := to == store.VersionAccepted
	kind := store.EventVersionAccepted
	if to == store.VersionRejected {
		kind = store.EventVersionRejected
	}
	reasonField := ""
	if reason != "" {
		reasonField = `,"reason":` + queue.JSON(reason)
	}
	moved := false
	err := s.txOne(ctx, durable, func(rows pgx.Rows) error {
		moved = rows.Next()
		return nil
	}, auditSQL, id, string(to), reason, kind, reasonField)
	if err != nil || moved {
		return err
	}
	return s.runRepeatable(ctx, durable, func(tx pgx.Tx) error { // a verdict given is a no-op
		v, err := getVersion(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if v.State == to {
			return nil
		}
		if v.State != store.VersionStaged {
			return fmt.Errorf("version %s is %s, cannot become %s: %w", v.Label(), v.State, to, store.ErrConflict)
		}
		if err := changed(tx.Exec(ctx, `UPDATE versions SET state = $1, reason = $2 WHERE id = $3 AND state = 'staged'`, string(to), reason, id)); err != nil {
			return fmt.Errorf("version %s: %w", v.Label(), err)
		}
		payload := map[string]any{"version": id, "label": v.Label(), "token": v.Token}
		if reason != "" {
			payload["reason"] = reason
		}
		return appendEvent(ctx, tx, store.Event{Run: v.Run, Kind: kind, Task: v.Task, Attempt: v.Attempt}, payload)
	})
}

// ReopenVersion implements store.Store.
func (s *Store) ReopenVersion(ctx context.Context, id int64, reason string) error {
	return s.runRepeatable(ctx, false, func(tx pgx.Tx) error { // a staged version is a no-op
		v, err := getVersion(ctx, tx, id, true)
		if err != nil {
			return err
		}
		reopen, ev, payload, err := v.Reopening(reason)
		if !reopen {
			return err
		}
		if err := changed(tx.Exec(ctx, `UPDATE versions SET state = 'staged', reason = '' WHERE id = $1 AND state = 'rejected'`, id)); err != nil {
			return fmt.Errorf("version %s: %w", v.Label(), err)
		}
		return appendEvent(ctx, tx, ev, payload)
	})
}

// auditSQL is audit's one statement for a staged version ($1): its state
// ($2) and reason ($3), and its event (kind $4) with the payload
// appendEvent would write, {"label":…[,"reason":…],"token":…,"version":…}
// ($5 the reason's field, quoted in Go, or empty), the label quoted as
// encoding/json quotes it (jsonStringSQL). No row when the version is not
// staged.
var auditSQL = `WITH n AS (SELECT pipec_now() AS now), u AS (
	UPDATE versions SET state = $2, reason = $3 WHERE id = $1 AND state = 'staged'
	RETURNING id, run, task, attempt, token, artifact || '@' || interval_key || '#' || digest AS label
), e AS (
	INSERT INTO events (run, time, kind, task, attempt, payload)
	SELECT u.run, ` + eventTime("n.now") + `, $4, u.task, u.attempt,
		'{"label":' || ` + jsonStringSQL("u.label") + ` || $5::text || ',"token":' || u.token || ',"version":' || u.id || '}'
	FROM u, n
)
SELECT 1 FROM u`

// jsonStringSQL is text expression x as a JSON string, quoted as
// encoding/json quotes it, so an event written by a statement has the bytes
// appendEvent would give it: to_json escapes the quote, the backslash and
// the control characters as Go does (\b, \f, \n, \r, \t, else \u00XX),
// and Go also escapes <, >, & and U+2028, U+2029, which to_json leaves.
func jsonStringSQL(x string) string {
	return `replace(replace(replace(replace(replace(to_json(` + x + `::text)::text,
		'<', '\u003c'), '>', '\u003e'), '&', '\u0026'), U&'\2028', '\u2028'), U&'\2029', '\u2029')`
}

// GetVersion implements store.Store.
func (s *Store) GetVersion(ctx context.Context, id int64) (store.Version, error) {
	return getVersion(ctx, s.read(), id, false)
}

// AttemptVersion implements store.Store. The versions' unique key begins
// with (artifact, interval_key): the lookup reads that interval's versions
// of the artifact only.
func (s *Store) AttemptVersion(ctx context.Context, ref store.AttemptRef, artifact, interval string) (store.Version, error) {
	v, err := scanVersion(s.read().QueryRow(ctx, `SELECT `+versionColumns+` FROM versions
WHERE artifact = $1 AND interval_key = $2 AND run = $3 AND task = $4 AND attempt = $5 ORDER BY id DESC LIMIT 1`,
		artifact, interval, ref.Run, ref.Task, ref.Number))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Version{}, fmt.Errorf("version of %s@%s recorded by attempt %s: %w", artifact, interval, ref, store.ErrNotFound)
	}
	return v, err
}

// AcceptedVersion implements store.Store.
func (s *Store) AcceptedVersion(ctx context.Context, pipeline, artifact, interval string) (store.Version, error) {
	v, err := scanVersion(s.read().QueryRow(ctx, `SELECT `+versionColumns+` FROM versions
WHERE pipeline = $1 AND artifact = $2 AND interval_key = $3 AND state = 'accepted' ORDER BY token DESC, id DESC LIMIT 1`,
		pipeline, artifact, interval))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Version{}, fmt.Errorf("accepted version of %s@%s in pipeline %s: %w", artifact, interval, pipeline, store.ErrNotFound)
	}
	return v, err
}
