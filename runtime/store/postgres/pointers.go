package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pipec/pipec/runtime/fence"
	"github.com/pipec/pipec/runtime/store"
)

const pointerColumns = `pipeline, sink, artifact, interval_key, version, token, unfenced, updated`

func scanPointer(sc pgx.Row) (store.Pointer, error) {
	var p store.Pointer
	var updated time.Time
	if err := sc.Scan(&p.Pipeline, &p.Sink, &p.Artifact, &p.Interval, &p.Version, &p.Token, &p.Unfenced, &updated); err != nil {
		return store.Pointer{}, err
	}
	p.Updated = updated.UTC()
	return p, nil
}

func getPointer(ctx context.Context, q queryer, pipeline, sink, artifact, interval string) (store.Pointer, error) {
	p, err := scanPointer(q.QueryRow(ctx, `SELECT `+pointerColumns+` FROM pointers
WHERE pipeline = $1 AND sink = $2 AND artifact = $3 AND interval_key = $4`, pipeline, sink, artifact, interval))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Pointer{}, fmt.Errorf("pointer %s:%s/%s@%s: %w", pipeline, sink, artifact, interval, store.ErrNotFound)
	}
	return p, err
}

// CompareAndSwapPointer implements store.Store. The comparison and the write
// happen under an advisory lock on (sink, artifact, interval), taken before
// the pointer is read, so of several publishers racing from any machine at
// most one wins against a given pointer value and the pointer's token only
// grows. The commit is durable (synchronous_commit = on) before it returns.
func (s *Store) CompareAndSwapPointer(ctx context.Context, sw store.Swap) (store.CASResult, error) {
	if sw.Pipeline == "" || sw.Sink == "" || sw.Artifact == "" || sw.Interval == "" {
		return store.CASResult{}, fmt.Errorf("compare-and-swap: pipeline, sink, artifact and interval are required")
	}
	var res store.CASResult
	err := s.txDurable(ctx, func(tx pgx.Tx) error {
		res = store.CASResult{}
		if err := lockKey(ctx, tx, "pointer", sw.Pipeline+"\x1f"+sw.Sink+"\x1f"+sw.Artifact+"\x1f"+sw.Interval); err != nil {
			return err
		}
		v, err := getVersion(ctx, tx, sw.Version, false)
		if err != nil {
			return err
		}
		switch {
		case v.Pipeline != sw.Pipeline || v.Artifact != sw.Artifact || v.Interval != sw.Interval:
			return fmt.Errorf("version %s of pipeline %s is not of %s@%s in pipeline %s: %w", v.Label(), v.Pipeline,
				sw.Artifact, sw.Interval, sw.Pipeline, store.ErrConflict)
		case v.State != store.VersionAccepted:
			return fmt.Errorf("version %s is %s, only an accepted version is published: %w", v.Label(), v.State, store.ErrConflict)
		case v.Token != sw.Token:
			return fmt.Errorf("version %s was produced with token %d, not %d: %w", v.Label(), v.Token, sw.Token, store.ErrConflict)
		}
		cur, err := getPointer(ctx, tx, sw.Pipeline, sw.Sink, sw.Artifact, sw.Interval)
		exists := err == nil
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		res.Previous = cur
		payload := map[string]any{
			"sink": sw.Sink, "artifact": sw.Artifact, "interval": sw.Interval,
			"version": sw.Version, "label": v.Label(), "token": sw.Token,
		}
		if sw.Unfenced {
			payload["unfenced"] = true
		}
		if exists {
			payload["current_version"] = cur.Version
			payload["current_token"] = cur.Token
		}
		ev := store.Event{Run: v.Run, Task: v.Task, Attempt: v.Attempt}
		decision := fence.Decide(held(cur), sw.Token, fmt.Sprint(sw.Version), !sw.Unfenced)
		if decision == fence.Accept && !sw.Unfenced {
			// Fence at grant: the producing task's newest attempt in the
			// version's fenced resource holds the artifact, published or not.
			var granted int64
			if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(g.token), 0) FROM attempts a
JOIN attempts g ON g.resource = a.resource AND g.task = a.task
WHERE a.run = $1 AND a.task = $2 AND a.number = $3`, v.Run, v.Task, v.Attempt).Scan(&granted); err != nil {
				return err
			}
			if fence.FencedAtGrant(sw.Token, granted) {
				decision = fence.Fenced
				res.GrantedToken = granted
				payload["granted_token"] = granted
				payload["fenced_by"] = "grant"
			}
		}
		switch {
		case decision == fence.Idempotent:
			res.Outcome, res.Pointer = store.Idempotent, cur
			ev.Kind = store.EventPublishIdempotent
			return appendEvent(ctx, tx, ev, payload)
		case decision == fence.Fenced:
			res.Outcome, res.Pointer = store.Fenced, cur
			ev.Kind = store.EventPublishFenced
			return appendEvent(ctx, tx, ev, payload)
		case sw.Expect != nil && *sw.Expect != cur.Token:
			res.Outcome, res.Pointer = store.Conflict, cur
			payload["expected_token"] = *sw.Expect
			ev.Kind = store.EventPublishConflict
			return appendEvent(ctx, tx, ev, payload)
		}
		next, err := scanPointer(tx.QueryRow(ctx, `INSERT INTO pointers (pipeline, sink, artifact, interval_key, version, token, unfenced, updated)
VALUES ($1, $2, $3, $4, $5, $6, $7, pipec_now())
ON CONFLICT (pipeline, sink, artifact, interval_key) DO UPDATE SET version = excluded.version, token = excluded.token,
	unfenced = excluded.unfenced, updated = excluded.updated
RETURNING `+pointerColumns, sw.Pipeline, sw.Sink, sw.Artifact, sw.Interval, sw.Version, sw.Token, sw.Unfenced))
		if err != nil {
			return err
		}
		res.Outcome, res.Pointer = store.Won, next
		ev.Kind = store.EventPublishWon
		return appendEvent(ctx, tx, ev, payload)
	})
	if err != nil {
		return store.CASResult{}, fmt.Errorf("compare-and-swap %s/%s@%s: %w", sw.Sink, sw.Artifact, sw.Interval, err)
	}
	return res, nil
}

// Pointer implements store.Store.
func (s *Store) Pointer(ctx context.Context, pipeline, sink, artifact, interval string) (store.Pointer, error) {
	return getPointer(ctx, s.pool, pipeline, sink, artifact, interval)
}

// held is a pointer as the fencing rule sees it (a version is named by its
// id in the store).
func held(p store.Pointer) fence.Held {
	return fence.Held{Exists: p.Version != 0, Token: p.Token, Version: fmt.Sprint(p.Version)}
}

// PointedVersions implements store.Store.
func (s *Store) PointedVersions(ctx context.Context, pipeline, sink string) (map[int64]store.Version, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+versionColumns+` FROM versions
WHERE id IN (SELECT version FROM pointers WHERE pipeline = $1 AND sink = $2)`, pipeline, sink)
	if err != nil {
		return nil, err
	}
	vs, err := collect(rows, scanVersion)
	if err != nil {
		return nil, err
	}
	return store.VersionsByID(vs), nil
}

// Pointers implements store.Store.
func (s *Store) Pointers(ctx context.Context, pipeline, sink string) ([]store.Pointer, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+pointerColumns+` FROM pointers WHERE pipeline = $1 AND sink = $2
ORDER BY artifact COLLATE "C", interval_key COLLATE "C"`, pipeline, sink)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanPointer)
}
