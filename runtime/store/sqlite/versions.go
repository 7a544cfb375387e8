package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pipec/pipec/runtime/store"
)

const versionColumns = `id, pipeline, artifact, interval_key, digest, run, task, attempt, token, code_version, location, state, reason, created`

func scanVersion(sc interface{ Scan(...any) error }) (store.Version, error) {
	var v store.Version
	var state string
	var created int64
	if err := sc.Scan(&v.ID, &v.Pipeline, &v.Artifact, &v.Interval, &v.Digest, &v.Run, &v.Task, &v.Attempt, &v.Token, &v.CodeVersion,
		&v.Location, &state, &v.Reason, &created); err != nil {
		return store.Version{}, err
	}
	v.State = store.VersionState(state)
	v.Created = timeOf(created)
	return v, nil
}

type rowQuerier interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

func getVersion(ctx context.Context, q rowQuerier, id int64) (store.Version, error) {
	v, err := scanVersion(q.QueryRowContext(ctx, `SELECT `+versionColumns+` FROM versions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Version{}, fmt.Errorf("version %d: %w", id, store.ErrNotFound)
	}
	return v, err
}

// RecordVersion implements Store. The token and code_version are taken from
// the store (the attempt and its run), not from v, so a version always carries
// the token of the attempt that produced it.
func (s *Store) RecordVersion(ctx context.Context, v store.Version) (store.Version, error) {
	if err := v.CheckRecord(); err != nil {
		return store.Version{}, err
	}
	var out store.Version
	err := s.write(ctx, normal, func(ctx context.Context, tx *wtx) error {
		existing, err := scanVersion(tx.QueryRowContext(ctx, `SELECT `+versionColumns+` FROM versions
WHERE artifact = ? AND interval_key = ? AND digest = ? AND run = ? AND task = ? AND attempt = ?`,
			v.Artifact, v.Interval, v.Digest, v.Run, v.Task, v.Attempt))
		if err == nil {
			out = existing
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var token int64
		var codeVersion, pipeline string
		err = tx.QueryRowContext(ctx, `SELECT a.token, r.code_version, r.pipeline FROM attempts a JOIN runs r ON r.id = a.run
WHERE a.run = ? AND a.task = ? AND a.number = ?`, v.Run, v.Task, v.Attempt).Scan(&token, &codeVersion, &pipeline)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("attempt %s: %w", store.AttemptRef{Run: v.Run, Task: v.Task, Number: v.Attempt}, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		now := s.now()
		res, err := tx.ExecContext(ctx, `INSERT INTO versions (pipeline, artifact, interval_key, digest, run, task, attempt, token, code_version, location, state, created)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'staged', ?)`,
			pipeline, v.Artifact, v.Interval, v.Digest, v.Run, v.Task, v.Attempt, token, codeVersion, v.Location, now)
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		out = store.Version{ID: id, Pipeline: pipeline, Artifact: v.Artifact, Interval: v.Interval, Digest: v.Digest, Run: v.Run, Task: v.Task,
			Attempt: v.Attempt, Token: token, CodeVersion: codeVersion, Location: v.Location, State: store.VersionStaged,
			Created: timeOf(now)}
		return appendEvent(ctx, tx, now, store.Event{Run: v.Run, Kind: store.EventVersionRecorded, Task: v.Task, Attempt: v.Attempt},
			map[string]any{"version": id, "label": out.Label(), "token": token})
	})
	if err != nil {
		return store.Version{}, fmt.Errorf("record version: %w", err)
	}
	return out, nil
}

// AcceptVersion implements Store.
func (s *Store) AcceptVersion(ctx context.Context, id int64) error {
	return s.audit(ctx, id, store.VersionAccepted, "")
}

// RejectVersion implements Store.
func (s *Store) RejectVersion(ctx context.Context, id int64, reason string) error {
	return s.audit(ctx, id, store.VersionRejected, reason)
}

// audit moves a staged version to its audit verdict; a verdict is final.
func (s *Store) audit(ctx context.Context, id int64, to store.VersionState, reason string) error {
	return s.write(ctx, normal, func(ctx context.Context, tx *wtx) error {
		v, err := getVersion(ctx, tx, id)
		if err != nil {
			return err
		}
		if v.State == to {
			return nil
		}
		if v.State != store.VersionStaged {
			return fmt.Errorf("version %s is %s, cannot become %s: %w", v.Label(), v.State, to, store.ErrConflict)
		}
		if err := changed(tx.ExecContext(ctx, `UPDATE versions SET state = ?, reason = ? WHERE id = ? AND state = 'staged'`,
			string(to), reason, id)); err != nil {
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
		return appendEvent(ctx, tx, s.now(), store.Event{Run: v.Run, Kind: kind, Task: v.Task, Attempt: v.Attempt}, payload)
	})
}

// ReopenVersion implements Store.
func (s *Store) ReopenVersion(ctx context.Context, id int64, reason string) error {
	return s.write(ctx, normal, func(ctx context.Context, tx *wtx) error {
		v, err := getVersion(ctx, tx, id)
		if err != nil {
			return err
		}
		reopen, ev, payload, err := v.Reopening(reason)
		if !reopen {
			return err
		}
		if err := changed(tx.ExecContext(ctx, `UPDATE versions SET state = 'staged', reason = '' WHERE id = ? AND state = 'rejected'`, id)); err != nil {
			return fmt.Errorf("version %s: %w", v.Label(), err)
		}
		return appendEvent(ctx, tx, s.now(), ev, payload)
	})
}

// GetVersion implements Store.
func (s *Store) GetVersion(ctx context.Context, id int64) (store.Version, error) {
	return getVersion(ctx, prepared{s}, id)
}

// AttemptVersion implements Store. The versions' unique key begins with
// (artifact, interval_key): the lookup reads that interval's versions of
// the artifact only.
func (s *Store) AttemptVersion(ctx context.Context, ref store.AttemptRef, artifact, interval string) (store.Version, error) {
	v, err := scanVersion(s.queryRow(ctx, `SELECT `+versionColumns+` FROM versions
WHERE artifact = ? AND interval_key = ? AND run = ? AND task = ? AND attempt = ? ORDER BY id DESC LIMIT 1`,
		artifact, interval, ref.Run, ref.Task, ref.Number))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Version{}, fmt.Errorf("version of %s@%s recorded by attempt %s: %w", artifact, interval, ref, store.ErrNotFound)
	}
	return v, err
}

// AcceptedVersion implements Store.
func (s *Store) AcceptedVersion(ctx context.Context, pipeline, artifact, interval string) (store.Version, error) {
	v, err := scanVersion(s.queryRow(ctx, `SELECT `+versionColumns+` FROM versions
WHERE pipeline = ? AND artifact = ? AND interval_key = ? AND state = 'accepted' ORDER BY token DESC, id DESC LIMIT 1`,
		pipeline, artifact, interval))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Version{}, fmt.Errorf("accepted version of %s@%s in pipeline %s: %w", artifact, interval, pipeline, store.ErrNotFound)
	}
	return v, err
}
