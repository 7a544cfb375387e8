package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/pipec/pipec/runtime/store"
)

// pipec gc's holds on the artifact versions (store.Collection), in the
// table of migration 17, judged on the lease clock as every lease here is.

// HoldCollection implements store.Store.
func (s *Store) HoldCollection(ctx context.Context, holder string, lease time.Duration) error {
	if lease <= 0 {
		return fmt.Errorf("hold the artifact versions for %s: the lease must be positive", holder)
	}
	err := s.write(ctx, durable, func(ctx context.Context, tx *wtx) error {
		now := s.now()
		boot, until := s.leaseUntil(lease)
		_, err := tx.ExecContext(ctx, `INSERT INTO collections (holder, since, expiry, expiry_boot, expiry_until)
VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (holder) DO UPDATE SET expiry = excluded.expiry, expiry_boot = excluded.expiry_boot, expiry_until = excluded.expiry_until`,
			holder, now, expiry(now, lease), boot, until)
		return err
	})
	if err != nil {
		return fmt.Errorf("hold the artifact versions for %s: %w", holder, err)
	}
	return nil
}

// EndCollection implements store.Store. Expired holds go with it, so the
// table keeps no more than the holds of gcs that are running or died.
func (s *Store) EndCollection(ctx context.Context, holder string) error {
	err := s.write(ctx, normal, func(ctx context.Context, tx *wtx) error {
		now := s.lease()
		_, err := tx.ExecContext(ctx, `DELETE FROM collections WHERE holder = ?1 OR NOT (expiry_boot = ?2 AND expiry_until > ?3)`,
			holder, now.Boot, now.Nanos)
		return err
	})
	if err != nil {
		return fmt.Errorf("release the artifact versions held for %s: %w", holder, err)
	}
	return nil
}

// Collecting implements store.Store.
func (s *Store) Collecting(ctx context.Context) (store.Collection, bool, error) {
	now := s.lease()
	var c store.Collection
	var until int64
	rows, err := s.query(ctx, `SELECT holder, expiry FROM collections WHERE expiry_boot = ?1 AND expiry_until > ?2
ORDER BY expiry_until DESC, holder LIMIT 1`, now.Boot, now.Nanos)
	if err != nil {
		return c, false, fmt.Errorf("read pipec gc's holds: %w", err)
	}
	defer rows.Close()
	found := rows.Next()
	if found {
		if err := rows.Scan(&c.Holder, &until); err != nil {
			return c, false, fmt.Errorf("read pipec gc's holds: %w", err)
		}
		c.Expiry = timeOf(until)
	}
	if err := rows.Err(); err != nil {
		return c, false, fmt.Errorf("read pipec gc's holds: %w", err)
	}
	return c, found, nil
}
