package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pipec/pipec/runtime/fence"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

const pointerColumns = `pipeline, sink, artifact, interval_key, version, token, unfenced, updated`

func scanPointer(sc interface{ Scan(...any) error }) (store.Pointer, error) {
	var p store.Pointer
	var updated int64
	if err := sc.Scan(&p.Pipeline, &p.Sink, &p.Artifact, &p.Interval, &p.Version, &p.Token, &p.Unfenced, &updated); err != nil {
		return store.Pointer{}, err
	}
	p.Updated = timeOf(updated)
	return p, nil
}

func getPointer(ctx context.Context, q rowQuerier, pipeline, sink, artifact, interval string) (store.Pointer, error) {
	p, err := scanPointer(q.QueryRowContext(ctx, `SELECT `+pointerColumns+` FROM pointers
WHERE pipeline = ? AND sink = ? AND artifact = ? AND interval_key = ?`, pipeline, sink, artifact, interval))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Pointer{}, fmt.Errorf("pointer %s:%s/%s@%s: %w", pipeline, sink, artifact, interval, store.ErrNotFound)
	}
	return p, err
}

// CompareAndSwapPointer implements Store. Durable: a swapped pointer survives
// power loss once it returns. (A fenced, conflicting or idempotent outcome
// swaps nothing; its event is committed at NORMAL.)
//
// The comparison and the write happen under SQLite's write lock (BEGIN
// IMMEDIATE), which every process takes before reading the pointer, so of
// several publishers racing with distinct tokens at most one wins against any
// given pointer value, and the pointer's token only grows.
func (s *Store) CompareAndSwapPointer(ctx context.Context, sw store.Swap) (store.CASResult, error) {
	if err := sw.Check(); err != nil {
		return store.CASResult{}, err
	}
	// A fenced, conflicting or idempotent publish changes no pointer, only the
	// event log, and needs no fsync. When a (lock-free, maybe stale) read of
	// the pointer predicts that, decide at NORMAL; should the decision under
	// the lock be a swap after all, it is made again, durably.
	mode := durable
	if s.predictNoSwap(ctx, sw) {
		mode = normal
	}
	res, err := s.cas(ctx, mode, sw)
	if errors.Is(err, errSwapNeedsFull) {
		res, err = s.cas(ctx, durable, sw)
	}
	if err != nil {
		return store.CASResult{}, fmt.Errorf("compare-and-swap %s/%s@%s: %w", sw.Sink, sw.Artifact, sw.Interval, err)
	}
	return res, nil
}

// predictNoSwap reads the pointer outside the write lock and reports
// whether the swap would certainly change nothing.
func (s *Store) predictNoSwap(ctx context.Context, sw store.Swap) bool {
	cur, err := getPointer(ctx, prepared{s}, sw.Pipeline, sw.Sink, sw.Artifact, sw.Interval)
	if err != nil {
		return false
	}
	return sw.Against(cur) != fence.Accept || (sw.Expect != nil && *sw.Expect != cur.Token)
}

// errSwapNeedsFull stops a compare-and-swap run at NORMAL that would swap.
var errSwapNeedsFull = errors.New("swap needs a durable commit")

// cas is one compare-and-swap transaction; at any mode but durable it stops
// with errSwapNeedsFull, changing nothing, where it would swap.
func (s *Store) cas(ctx context.Context, mode commitMode, sw store.Swap) (store.CASResult, error) {
	var res store.CASResult
	err := s.write(ctx, mode, func(ctx context.Context, tx *wtx) error {
		res = store.CASResult{}
		v, err := getVersion(ctx, tx, sw.Version)
		if err != nil {
			return err
		}
		now := s.now()
		cur, err := getPointer(ctx, tx, sw.Pipeline, sw.Sink, sw.Artifact, sw.Interval)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		d, err := store.DecideSwap(sw, v, cur, func() (granted int64, err error) {
			err = tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(g.token), 0) FROM attempts a
JOIN attempts g ON g.resource = a.resource AND g.task = a.task AND NOT (g.state = 'failed' AND g.class = ?)
WHERE a.run = ? AND a.task = ? AND a.number = ?`, queue.ClassNotStarted, v.Run, v.Task, v.Attempt).Scan(&granted)
			return granted, err
		})
		if err != nil {
			return err
		}
		res = d.Result
		if res.Outcome != store.Won {
			return appendEvent(ctx, tx, now, d.Event, d.Payload)
		}
		if mode != durable {
			return errSwapNeedsFull
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO pointers (pipeline, sink, artifact, interval_key, version, token, unfenced, updated)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (pipeline, sink, artifact, interval_key) DO UPDATE SET version = excluded.version, token = excluded.token,
	unfenced = excluded.unfenced, updated = excluded.updated`,
			sw.Pipeline, sw.Sink, sw.Artifact, sw.Interval, sw.Version, sw.Token, sw.Unfenced, now); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, bumpGenerationSQL, sw.Pipeline, sw.Sink).Scan(&res.Generation); err != nil {
			return err
		}
		res.Pointer = store.Pointer{Pipeline: sw.Pipeline, Sink: sw.Sink, Artifact: sw.Artifact, Interval: sw.Interval, Version: sw.Version,
			Token: sw.Token, Unfenced: sw.Unfenced, Updated: timeOf(now)}
		return appendEvent(ctx, tx, now, d.Event, d.Payload)
	})
	return res, err
}

// bumpGenerationSQL takes the next generation of sink $2 of pipeline $1
// (a swap's, under the write lock every swap takes) and returns it.
const bumpGenerationSQL = `INSERT INTO pointer_generations (pipeline, sink, generation) VALUES (?, ?, 1)
ON CONFLICT (pipeline, sink) DO UPDATE SET generation = generation + 1 RETURNING generation`

// PointersGeneration implements Store.
func (s *Store) PointersGeneration(ctx context.Context, pipeline, sink string) (int64, error) {
	var g int64
	err := s.queryRow(ctx, `SELECT generation FROM pointer_generations WHERE pipeline = ? AND sink = ?`,
		pipeline, sink).Scan(&g)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return g, err
}

// Pointer implements Store.
func (s *Store) Pointer(ctx context.Context, pipeline, sink, artifact, interval string) (store.Pointer, error) {
	return getPointer(ctx, prepared{s}, pipeline, sink, artifact, interval)
}

// PointedVersions implements Store.
func (s *Store) PointedVersions(ctx context.Context, pipeline, sink string) (map[int64]store.Version, error) {
	vs, err := collect(func(r *sql.Rows) (store.Version, error) { return scanVersion(r) })(s.query(ctx, `SELECT `+versionColumns+` FROM versions
WHERE id IN (SELECT version FROM pointers WHERE pipeline = ? AND sink = ?)`, pipeline, sink))
	if err != nil {
		return nil, err
	}
	return store.VersionsByID(vs), nil
}

// Pointers implements Store.
func (s *Store) Pointers(ctx context.Context, pipeline, sink string) ([]store.Pointer, error) {
	rows, err := s.query(ctx, `SELECT `+pointerColumns+` FROM pointers WHERE pipeline = ? AND sink = ? ORDER BY artifact, interval_key`,
		pipeline, sink)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Pointer
	for rows.Next() {
		p, err := scanPointer(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
