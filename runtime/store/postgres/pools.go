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

// Pool slots held outside the claims (queue.PoolSlots), in the table of
// migration 11. A hold takes the pool's advisory lock, the one a claim
// tries before counting (poolsBusy), so a hold and a claim never both take
// the last slot; a hold waits for the lock, where a claim passes the pool
// over.

var _ queue.PoolSlots = (*Store)(nil)

// poolsBusySQL counts, per pool of $1, what every decision about its slots
// counts (a claim's and HoldPoolSlot's): the pool's claimed work rows and
// its live holds, but the hold of task $3 of run $2 (a task taking its
// slot again; "" for none).
const poolsBusySQL = `SELECT pool, count(*) FROM (
	SELECT pool FROM work WHERE state = 'claimed' AND pool = ANY($1::text[])
	UNION ALL
	SELECT pool FROM pool_holds WHERE pool = ANY($1::text[]) AND expiry > pipec_now() AND (run, task) <> ($2::text, $3::text)
) taken GROUP BY pool`

// HoldPoolSlot implements queue.PoolSlots. It, RenewPoolSlot and
// ReleasePoolSlot are repeatable (runRepeatable): made twice, a hold is
// the same holder's one hold, and a renewal or a release the same.
func (s *Store) HoldPoolSlot(ctx context.Context, key string, slots int, h queue.PoolHolder, lease time.Duration) (int, bool, error) {
	if lease <= 0 {
		return 0, false, fmt.Errorf("hold a slot of pool %s: the lease must be positive", key)
	}
	var busy int
	var held bool
	err := s.runRepeatable(ctx, false, func(tx pgx.Tx) error {
		busy, held = 0, false
		if err := lockKey(ctx, tx, "pool", key); err != nil {
			return err
		}
		// Expired holds count nowhere: the pool's are dropped here, so
		// the table keeps no more than its live holds and a few dead.
		if _, err := tx.Exec(ctx, `DELETE FROM pool_holds WHERE pool = $1 AND expiry <= pipec_now()`, key); err != nil {
			return err
		}
		var k string
		err := tx.QueryRow(ctx, poolsBusySQL, []string{key}, h.Run, h.Task).Scan(&k, &busy)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if held = queue.PoolHolding(key, slots, busy); !held {
			return nil
		}
		_, err = tx.Exec(ctx, `INSERT INTO pool_holds (pool, run, task, worker, since, expiry)
VALUES ($1, $2, $3, $4, pipec_now(), pipec_now() + $5::bigint * interval '1 microsecond')
ON CONFLICT (pool, run, task) DO UPDATE SET worker = excluded.worker, since = excluded.since, expiry = excluded.expiry`,
			key, h.Run, h.Task, h.Worker, micros(lease))
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("hold a slot of pool %s for %s %s: %w", key, h.Run, h.Task, err)
	}
	return busy, held, nil
}

// RenewPoolSlot implements queue.PoolSlots.
func (s *Store) RenewPoolSlot(ctx context.Context, key string, h queue.PoolHolder, lease time.Duration) error {
	if lease <= 0 {
		return fmt.Errorf("renew a slot of pool %s: the lease must be positive", key)
	}
	err := s.runRepeatable(ctx, false, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE pool_holds SET expiry = pipec_now() + $5::bigint * interval '1 microsecond'
WHERE pool = $1 AND run = $2 AND task = $3 AND worker = $4 AND expiry > pipec_now()`, key, h.Run, h.Task, h.Worker, micros(lease))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%s holds no live slot: %w", h.Worker, store.ErrLeaseLost)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("renew a slot of pool %s for %s %s: %w", key, h.Run, h.Task, err)
	}
	return nil
}

// ReleasePoolSlot implements queue.PoolSlots.
func (s *Store) ReleasePoolSlot(ctx context.Context, key string, h queue.PoolHolder) error {
	err := s.runRepeatable(ctx, false, func(tx pgx.Tx) error {
		// A task of the pool may be claimed now: idle workers look.
		_, err := tx.Exec(ctx, `WITH gone AS (
	DELETE FROM pool_holds WHERE pool = $1 AND run = $2 AND task = $3 AND worker = $4 RETURNING 1
) SELECT pg_notify('`+workChannel+`', '') FROM gone`, key, h.Run, h.Task, h.Worker)
		return err
	})
	if err != nil {
		return fmt.Errorf("release a slot of pool %s for %s %s: %w", key, h.Run, h.Task, err)
	}
	return nil
}
