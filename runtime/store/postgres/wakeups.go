package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pipec/pipec/runtime/queue"
)

// notifyWorkSQL wakes the workers waiting on workChannel once its
// transaction commits.
const notifyWorkSQL = `SELECT pg_notify('` + workChannel + `', '')`

// workChannel is the NOTIFY channel of "tasks may be ready".
const workChannel = "pipec_work"

// notifyWork wakes the listening workers when the transaction commits
// (PostgreSQL delivers notifications at commit and folds duplicates).
func notifyWork(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, notifyWorkSQL)
	return err
}

// Wakeups implements queue.Queue with LISTEN on one connection held for
// ctx's lifetime.
func (s *Store) Wakeups(ctx context.Context) (<-chan struct{}, error) {
	return s.listen(ctx, workChannel, "")
}

// runEndChannel is the NOTIFY channel of a run's end, its id the payload
// (the runs_ended trigger).
const runEndChannel = "pipec_run_end"

var _ queue.RunEnds = (*Store)(nil)

// RunEnded implements queue.RunEnds with LISTEN on one connection held for
// ctx's lifetime.
func (s *Store) RunEnded(ctx context.Context, run string) (<-chan struct{}, error) {
	return s.listen(ctx, runEndChannel, run)
}

// listen returns a channel that receives (coalescing) the notifications of
// channel, those whose payload is payload when that is set, on one
// connection held for ctx's lifetime; it is closed when ctx ends or the
// connection breaks.
func (s *Store) listen(ctx context.Context, channel, payload string) (<-chan struct{}, error) {
	var conn *pgxpool.Conn
	err := s.reading(ctx, func() error { // on another connection when a pooled one is gone
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		if _, err := c.Exec(ctx, `LISTEN `+channel); err != nil {
			c.Release()
			return err
		}
		conn = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	ch := make(chan struct{}, 1)
	go func() {
		defer close(ch)
		defer conn.Release()
		defer func() {
			// The connection goes back to the pool: stop listening first.
			_, _ = conn.Exec(context.WithoutCancel(ctx), `UNLISTEN *`)
		}()
		for {
			n, err := conn.Conn().WaitForNotification(ctx)
			if err != nil {
				return // ctx ended, or the connection broke: the poll goes on
			}
			if payload != "" && n.Payload != payload {
				continue
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return ch, nil
}
