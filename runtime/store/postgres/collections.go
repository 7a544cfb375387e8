package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pipec/pipec/runtime/store"
)

// pipec gc's holds on the artifact versions (store.Collection), in the
// table of migration 21, judged on the server's clock as every lease here
// is.

// HoldCollection implements store.Store: a synchronous commit, as a token
// grant's, so no crash of the server takes back a hold its gc relies on.
func (s *Store) HoldCollection(ctx context.Context, holder string, lease time.Duration) error {
	if lease <= 0 {
		return fmt.Errorf("hold the artifact versions for %s: the lease must be positive", holder)
	}
	err := s.txDurable(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO collections (holder, since, expiry)
VALUES ($1, pipec_now(), pipec_now() + $2::bigint * interval '1 microsecond')
ON CONFLICT (holder) DO UPDATE SET expiry = excluded.expiry`, holder, micros(lease))
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM collections WHERE holder = $1 OR expiry <= pipec_now()`, holder)
		return err
	})
	if err != nil {
		return fmt.Errorf("release the artifact versions held for %s: %w", holder, err)
	}
	return nil
}

// Collecting implements store.Store: one read, in a transaction only where
// a test's clock must apply.
func (s *Store) Collecting(ctx context.Context) (store.Collection, bool, error) {
	const q = `SELECT holder, expiry FROM collections WHERE expiry > pipec_now() ORDER BY expiry DESC, holder COLLATE "C" LIMIT 1`
	var c store.Collection
	scan := func(row pgx.Row) error { return row.Scan(&c.Holder, &c.Expiry) }
	var err error
	if s.clock != nil {
		err = s.tx(ctx, func(tx pgx.Tx) error { return scan(tx.QueryRow(ctx, q)) })
	} else {
		err = scan(s.read().QueryRow(ctx, q))
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Collection{}, false, nil
	}
	if err != nil {
		return store.Collection{}, false, fmt.Errorf("read pipec gc's holds: %w", err)
	}
	return c, true, nil
}
