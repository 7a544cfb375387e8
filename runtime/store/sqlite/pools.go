package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// Pool slots held outside the claims (queue.PoolSlots), in the table of
// migration 14. Every decision about a pool's slots runs under the file's
// write lock, so a hold and a claim never both take the last slot.

var _ queue.PoolSlots = (*Store)(nil)

// poolBusy is a pool's busy count as every decision about its slots reads
// it (a claim's and HoldPoolSlot's): the pool's claimed work rows and the
// live holds, but the hold of except (a task taking its slot again).
func poolBusy(ctx context.Context, tx *queueTx, key string, except queue.Ref) (int, error) {
	now := tx.s.lease()
	var n int
	err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM work WHERE state = 'claimed' AND pool <> '' AND pool = ?1)
	+ (SELECT count(*) FROM pool_holds WHERE pool = ?1 AND expiry_boot = ?2 AND expiry_until > ?3 AND NOT (run = ?4 AND task = ?5))`,
		key, now.Boot, now.Nanos, except.Run, except.Task).Scan(&n)
	return n, err
}

// HoldPoolSlot implements queue.PoolSlots.
func (s *Store) HoldPoolSlot(ctx context.Context, key string, slots int, h queue.PoolHolder, lease time.Duration) (int, bool, error) {
	if lease <= 0 {
		return 0, false, fmt.Errorf("hold a slot of pool %s: the lease must be positive", key)
	}
	var busy int
	var held bool
	err := s.update(ctx, func(ctx context.Context, tx *queueTx) error {
		// Expired holds count nowhere: the pool's are dropped here, so
		// the table keeps no more than its live holds and a few dead.
		now := s.lease()
		if _, err := tx.Exec(ctx, `DELETE FROM pool_holds WHERE pool = ?1 AND NOT (expiry_boot = ?2 AND expiry_until > ?3)`,
			key, now.Boot, now.Nanos); err != nil {
			return err
		}
		n, err := poolBusy(ctx, tx, key, queue.Ref{Run: h.Run, Task: h.Task})
		if err != nil {
			return err
		}
		busy, held = n, queue.PoolHolding(key, slots, n)
		if !held {
			return nil
		}
		until := tx.LeaseUntil(lease)
		_, err = tx.Exec(ctx, `INSERT INTO pool_holds (pool, run, task, worker, since, expiry_boot, expiry_until)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (pool, run, task) DO UPDATE SET worker = excluded.worker, since = excluded.since,
	expiry_boot = excluded.expiry_boot, expiry_until = excluded.expiry_until`,
			key, h.Run, h.Task, h.Worker, tx.Now(), until.Boot, until.Nanos)
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
	err := s.update(ctx, func(ctx context.Context, tx *queueTx) error {
		now := s.lease()
		until := tx.LeaseUntil(lease)
		res, err := tx.Exec(ctx, `UPDATE pool_holds SET expiry_boot = ?5, expiry_until = ?6
WHERE pool = ?1 AND run = ?2 AND task = ?3 AND worker = ?4 AND expiry_boot = ?7 AND expiry_until > ?8`,
			key, h.Run, h.Task, h.Worker, until.Boot, until.Nanos, now.Boot, now.Nanos)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
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
	err := s.update(ctx, func(ctx context.Context, tx *queueTx) error {
		res, err := tx.Exec(ctx, `DELETE FROM pool_holds WHERE pool = ? AND run = ? AND task = ? AND worker = ?`, key, h.Run, h.Task, h.Worker)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		return bumpSignal(ctx, tx) // a task of the pool may be claimed now
	})
	if err != nil {
		return fmt.Errorf("release a slot of pool %s for %s %s: %w", key, h.Run, h.Task, err)
	}
	return nil
}
