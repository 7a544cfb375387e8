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
	p, err := scanPointer(q.QueryRow(ctx, getPointerSQL, pipeline, sink, artifact, interval))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Pointer{}, fmt.Errorf("pointer %s:%s/%s@%s: %w", pipeline, sink, artifact, interval, store.ErrNotFound)
	}
	return p, err
}

// getPointerSQL reads the pointer of $1 pipeline, $2 sink, $3 artifact, $4
// interval.
const getPointerSQL = `SELECT ` + pointerColumns + ` FROM pointers
WHERE pipeline = $1 AND sink = $2 AND artifact = $3 AND interval_key = $4`

// CompareAndSwapPointer implements store.Store. The comparison and the write
// happen under an advisory lock on (sink, artifact, interval), taken before
// the pointer is read, so of several publishers racing from any machine at
// most one wins against a given pointer value and the pointer's token only
// grows. The commit is durable (synchronous_commit = on) before it returns.
func (s *Store) CompareAndSwapPointer(ctx context.Context, sw store.Swap) (store.CASResult, error) {
	if err := sw.Check(); err != nil {
		return store.CASResult{}, err
	}
	var res store.CASResult
	// Two round trips: what the decision reads (the version, the pointer,
	// the newest token granted for the version's task), under the lock, with
	// the BEGIN; then its writes with the COMMIT.
	// Repeatable: a second run after the first committed finds the
	// pointer it made (Idempotent).
	err := s.txRepeatable(ctx, true, func(tx pgx.Tx, ends *txEnds) error {
		res = store.CASResult{}
		reads := &pgx.Batch{}
		queueLockKey(reads, "pointer", sw.Pipeline+"\x1f"+sw.Sink+"\x1f"+sw.Artifact+"\x1f"+sw.Interval)
		reads.Queue(`SELECT `+versionColumns+` FROM versions WHERE id = $1`, sw.Version)
		reads.Queue(getPointerSQL, sw.Pipeline, sw.Sink, sw.Artifact, sw.Interval)
		// Read whatever the decision: it is needed only for a swap the
		// pointer would accept, and costs an index probe or two.
		reads.Queue(`SELECT COALESCE(MAX(g.token), 0) FROM versions v
JOIN attempts a ON a.run = v.run AND a.task = v.task AND a.number = v.attempt
JOIN attempts g ON g.resource = a.resource AND g.task = a.task AND NOT (g.state = 'failed' AND g.class = $2)
WHERE v.id = $1`, sw.Version, queue.ClassNotStarted)
		br, err := sendSkipping(ctx, tx, ends, reads, 1) // and the lock
		var v store.Version
		var cur store.Pointer
		var granted int64
		if err == nil {
			v, err = scanVersion(br.QueryRow())
			if errors.Is(err, pgx.ErrNoRows) {
				err = fmt.Errorf("version %d: %w", sw.Version, store.ErrNotFound)
			}
		}
		if err == nil {
			cur, err = scanPointer(br.QueryRow())
			if errors.Is(err, pgx.ErrNoRows) {
				err = nil
			}
		}
		if err == nil {
			err = br.QueryRow().Scan(&granted)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		d, err := store.DecideSwap(sw, v, cur, func() (int64, error) { return granted, nil })
		if err != nil {
			return err
		}
		res = d.Result
		writes := &pgx.Batch{}
		if res.Outcome == store.Won {
			writes.Queue(`INSERT INTO pointers (pipeline, sink, artifact, interval_key, version, token, unfenced, updated)
VALUES ($1, $2, $3, $4, $5, $6, $7, pipec_now())
ON CONFLICT (pipeline, sink, artifact, interval_key) DO UPDATE SET version = excluded.version, token = excluded.token,
	unfenced = excluded.unfenced, updated = excluded.updated
RETURNING `+pointerColumns, sw.Pipeline, sw.Sink, sw.Artifact, sw.Interval, sw.Version, sw.Token, sw.Unfenced)
			writes.Queue(bumpGenerationSQL, sw.Pipeline, sw.Sink)
		}
		text, err := store.PayloadText(d.Payload)
		if err != nil {
			return err
		}
		writes.Queue(insertEventSQL, d.Event.Run, d.Event.Kind, d.Event.Task, d.Event.Attempt, text)
		if res.Outcome != store.Won {
			return sendLast(ctx, tx, ends, writes)
		}
		return sendLastReading(ctx, tx, ends, writes, 2, func(br pgx.BatchResults) error {
			var err error
			if res.Pointer, err = scanPointer(br.QueryRow()); err != nil {
				return err
			}
			return br.QueryRow().Scan(&res.Generation)
		})
	})
	if err != nil {
		return store.CASResult{}, fmt.Errorf("compare-and-swap %s/%s@%s: %w", sw.Sink, sw.Artifact, sw.Interval, err)
	}
	return res, nil
}

// bumpGenerationSQL takes the next generation of sink $2 of pipeline $1
// and returns it; the row stays locked until the swap commits.
const bumpGenerationSQL = `INSERT INTO pointer_generations (pipeline, sink, generation) VALUES ($1, $2, 1)
ON CONFLICT (pipeline, sink) DO UPDATE SET generation = pointer_generations.generation + 1 RETURNING generation`

// PointersGeneration implements store.Store.
func (s *Store) PointersGeneration(ctx context.Context, pipeline, sink string) (int64, error) {
	var g int64
	err := s.read().QueryRow(ctx, `SELECT generation FROM pointer_generations WHERE pipeline = $1 AND sink = $2`,
		pipeline, sink).Scan(&g)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return g, err
}

// Pointer implements store.Store.
func (s *Store) Pointer(ctx context.Context, pipeline, sink, artifact, interval string) (store.Pointer, error) {
	return getPointer(ctx, s.read(), pipeline, sink, artifact, interval)
}

// PointedVersions implements store.Store.
func (s *Store) PointedVersions(ctx context.Context, pipeline, sink string) (map[int64]store.Version, error) {
	rows, err := s.read().Query(ctx, `SELECT `+versionColumns+` FROM versions
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
	rows, err := s.read().Query(ctx, `SELECT `+pointerColumns+` FROM pointers WHERE pipeline = $1 AND sink = $2
ORDER BY artifact COLLATE "C", interval_key COLLATE "C"`, pipeline, sink)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanPointer)
}
