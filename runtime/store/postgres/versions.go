package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

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
	if v.Artifact == "" || v.Interval == "" || v.Run == "" || v.Task == "" || v.Attempt <= 0 {
		return store.Version{}, fmt.Errorf("record version: artifact, interval, run, task and attempt are required")
	}
	if !strings.HasPrefix(v.Digest, "sha256:") {
		return store.Version{}, fmt.Errorf("record version: digest %q is not sha256:<hex>", v.Digest)
	}
	var out store.Version
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = scanVersion(tx.QueryRow(ctx, `INSERT INTO versions (pipeline, artifact, interval_key, digest, run, task, attempt, token, code_version, location, state, created)
SELECT r.pipeline, $1, $2, $3, a.run, a.task, a.number, a.token, r.code_version, $7, 'staged', pipec_now()
FROM attempts a JOIN runs r ON r.id = a.run
WHERE a.run = $4 AND a.task = $5 AND a.number = $6
ON CONFLICT (artifact, interval_key, digest, run, task, attempt) DO NOTHING
RETURNING `+versionColumns, v.Artifact, v.Interval, v.Digest, v.Run, v.Task, v.Attempt, v.Location))
		if errors.Is(err, pgx.ErrNoRows) {
			// Either the version exists already or the attempt does not.
			existing, err := scanVersion(tx.QueryRow(ctx, `SELECT `+versionColumns+` FROM versions
WHERE artifact = $1 AND interval_key = $2 AND digest = $3 AND run = $4 AND task = $5 AND attempt = $6`,
				v.Artifact, v.Interval, v.Digest, v.Run, v.Task, v.Attempt))
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("attempt %s: %w", store.AttemptRef{Run: v.Run, Task: v.Task, Number: v.Attempt}, store.ErrNotFound)
			}
			out = existing
			return err
		}
		if err != nil {
			return err
		}
		return appendEvent(ctx, tx, store.Event{Run: v.Run, Kind: store.EventVersionRecorded, Task: v.Task, Attempt: v.Attempt},
			map[string]any{"version": out.ID, "label": out.Label(), "token": out.Token})
	})
	if err != nil {
		return store.Version{}, fmt.Errorf("record version: %w", err)
	}
	return out, nil
}

// AcceptVersion implements store.Store.
func (s *Store) AcceptVersion(ctx context.Context, id int64) error {
	return s.audit(ctx, id, store.VersionAccepted, "")
}

// RejectVersion implements store.Store.
func (s *Store) RejectVersion(ctx context.Context, id int64, reason string) error {
	return s.audit(ctx, id, store.VersionRejected, reason)
}

// audit moves a staged version to its audit verdict; a verdict is final.
func (s *Store) audit(ctx context.Context, id int64, to store.VersionState, reason string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
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
		kind := store.EventVersionAccepted
		if to == store.VersionRejected {
			kind = store.EventVersionRejected
		}
		payload := map[string]any{"version": id, "label": v.Label(), "token": v.Token}
		if reason != "" {
			payload["reason"] = reason
		}
		return appendEvent(ctx, tx, store.Event{Run: v.Run, Kind: kind, Task: v.Task, Attempt: v.Attempt}, payload)
	})
}

// GetVersion implements store.Store.
func (s *Store) GetVersion(ctx context.Context, id int64) (store.Version, error) {
	return getVersion(ctx, s.pool, id, false)
}

// AcceptedVersion implements store.Store.
func (s *Store) AcceptedVersion(ctx context.Context, pipeline, artifact, interval string) (store.Version, error) {
	v, err := scanVersion(s.pool.QueryRow(ctx, `SELECT `+versionColumns+` FROM versions
WHERE pipeline = $1 AND artifact = $2 AND interval_key = $3 AND state = 'accepted' ORDER BY token DESC, id DESC LIMIT 1`,
		pipeline, artifact, interval))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Version{}, fmt.Errorf("accepted version of %s@%s in pipeline %s: %w", artifact, interval, pipeline, store.ErrNotFound)
	}
	return v, err
}
