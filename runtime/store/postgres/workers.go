package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// Register implements queue.Queue.
func (s *Store) Register(ctx context.Context, w queue.WorkerInfo, lease time.Duration) error {
	if w.Name == "" {
		return fmt.Errorf("register: a worker needs a name")
	}
	// Repeatable: made again after a COMMIT whose fate a restart hid, it
	// finds the row its first try wrote, this process's, and writes it
	// again.
	return s.runRepeatable(ctx, false, func(tx pgx.Tx) error {
		var host string
		var pid int
		var live bool
		err := tx.QueryRow(ctx, `SELECT host, pid, state = 'live' AND expiry > pipec_now() FROM workers WHERE name = $1 FOR UPDATE`,
			w.Name).Scan(&host, &pid, &live)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		replacing, err := queue.Registering(w, err == nil, host, pid, live)
		if err != nil {
			return err
		}
		if replacing {
			if _, err := tx.Exec(ctx, `UPDATE work SET claim_expiry = pipec_now() WHERE worker = $1 AND state = 'claimed'`, w.Name); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO workers (name, host, pid, slots, labels, state, started, last_seen, expiry)
SELECT $1, $2, $3, $4, $5, 'live', n.now, n.now, n.now + $6::bigint * interval '1 microsecond' FROM (SELECT pipec_now() AS now) n
ON CONFLICT (name) DO UPDATE SET host = excluded.host, pid = excluded.pid, slots = excluded.slots, labels = excluded.labels,
	state = 'live', started = excluded.started, last_seen = excluded.last_seen, expiry = excluded.expiry`,
			w.Name, w.Host, w.PID, w.Slots, queue.NormalLabels(w.Labels), micros(lease))
		return err
	})
}

// Heartbeat implements queue.Queue: the worker's row and its claims are
// renewed in one round trip (BEGIN and COMMIT riding with them); the claims
// only while the worker's row is there to renew.
func (s *Store) Heartbeat(ctx context.Context, name string, lease time.Duration) ([]queue.Ref, error) {
	var held []queue.Ref
	found := false
	err := s.txPipelined(ctx, func(tx pgx.Tx, ends *txEnds) error {
		held = nil
		b := &pgx.Batch{}
		b.Queue(`UPDATE workers SET last_seen = pipec_now(), expiry = pipec_now() + $2::bigint * interval '1 microsecond'
WHERE name = $1 AND state <> 'stopped'`, name, micros(lease))
		// Only claims still live: one that expired (this worker was paused
		// or cut off) is lost, whether or not a sweep saw it yet.
		b.Queue(`UPDATE work SET claim_expiry = pipec_now() + $2::bigint * interval '1 microsecond'
WHERE worker = $1 AND state = 'claimed' AND claim_expiry > pipec_now()
	AND EXISTS (SELECT 1 FROM workers WHERE name = $1 AND state <> 'stopped') RETURNING run, task`, name, micros(lease))
		ends.last(b)
		br, err := sendSkipping(ctx, tx, ends, b, 0)
		defer br.Close()
		if err != nil {
			return err
		}
		tag, err := br.Exec()
		if err != nil {
			return err
		}
		found = tag.RowsAffected() > 0
		rows, err := br.Query()
		if err != nil {
			return err
		}
		held, err = collect(rows, func(r pgx.Row) (queue.Ref, error) {
			var ref queue.Ref
			return ref, r.Scan(&ref.Run, &ref.Task)
		})
		if err != nil {
			return err
		}
		if err := ends.committed(br); err != nil {
			return err
		}
		return br.Close()
	})
	if err == nil && !found {
		// Nothing was renewed: the worker is not registered.
		return nil, fmt.Errorf("heartbeat: worker %s is not registered: %w", name, store.ErrNotFound)
	}
	return held, err
}

// peek reports whether query finds a row, in a transaction of one round
// trip (so a test clock judges pipec_now() as in every transaction): the
// beat's sweeps, which nearly always find nothing, then take no locks and
// write nothing. A row that appears just after is found at the next beat.
func (s *Store) peek(ctx context.Context, query string, args ...any) (bool, error) {
	var found bool
	err := s.txPipelined(ctx, func(tx pgx.Tx, ends *txEnds) error {
		b := &pgx.Batch{}
		b.Queue(`SELECT EXISTS (`+query+`)`, args...)
		ends.last(b)
		br, err := sendSkipping(ctx, tx, ends, b, 0)
		defer br.Close()
		if err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&found); err != nil {
			return err
		}
		if err := ends.committed(br); err != nil {
			return err
		}
		return br.Close()
	})
	return found, err
}

// Stopping implements queue.Queue.
func (s *Store) Stopping(ctx context.Context, name string) error {
	return s.runRepeatable(ctx, false, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE workers SET state = 'stopping' WHERE name = $1 AND state = 'live'`, name)
		return err
	})
}

// Deregister implements queue.Queue.
func (s *Store) Deregister(ctx context.Context, name string) error {
	return s.runRepeatable(ctx, false, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE workers SET state = 'stopped', last_seen = pipec_now() WHERE name = $1`, name)
		return err
	})
}

// Sweep implements queue.Queue: a claim whose lease expired belongs to a
// worker that stopped renewing (SIGSTOP, SIGKILL, a partition); the model
// treats it as a lost lease (queue.Expired).
func (s *Store) Sweep(ctx context.Context) (int, error) {
	if ok, err := s.peek(ctx, `SELECT 1 FROM work WHERE state = 'claimed' AND claim_expiry <= pipec_now()`); err != nil || !ok {
		if err != nil {
			return 0, fmt.Errorf("sweep: %w", err)
		}
		return 0, nil
	}
	n := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		n = 0
		rows, err := tx.Query(ctx, `SELECT run, task, limits, failover, dependents, worker FROM work
WHERE state = 'claimed' AND claim_expiry <= pipec_now() ORDER BY run COLLATE "C", task COLLATE "C" FOR UPDATE SKIP LOCKED`)
		if err != nil {
			return err
		}
		expired, err := collect(rows, func(r pgx.Row) (queue.Work, error) {
			var w queue.Work
			var limits, st, deps string
			if err := r.Scan(&w.Run, &w.Task, &limits, &st, &deps, &w.Worker); err != nil {
				return w, err
			}
			return w, queue.DecodeWork(&w, limits, st, deps)
		})
		if err != nil {
			return err
		}
		for i := range expired {
			w := &expired[i]
			if err := lockSubmission(ctx, tx, w.Run); err != nil {
				return err
			}
			c := queue.Expired(w)
			if err := applyChange(ctx, tx, w, c); err != nil {
				return err
			}
			if err := unknownAttempts(ctx, tx, w.Ref, c.Unknown); err != nil {
				return err
			}
			if err := maybeFinishRun(ctx, tx, w.Run); err != nil {
				return err
			}
			n++
		}
		if n > 0 {
			return notifyWork(ctx, tx)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	return n, nil
}

// unknownAttempts marks the task's unfinished attempts unknown, for reason
// (queue.Change.Unknown; nothing when it is empty).
func unknownAttempts(ctx context.Context, tx pgx.Tx, ref queue.Ref, reason string) error {
	if reason == "" {
		return nil
	}
	rows, err := tx.Query(ctx, `UPDATE attempts SET state = 'unknown', lease_expiry = NULL
WHERE run = $1 AND task = $2 AND state IN ('queued', 'running') RETURNING number, token`, ref.Run, ref.Task)
	if err != nil {
		return err
	}
	type nt struct {
		n   int
		tok int64
	}
	marked, err := collect(rows, func(r pgx.Row) (nt, error) {
		var x nt
		return x, r.Scan(&x.n, &x.tok)
	})
	if err != nil {
		return err
	}
	sort.Slice(marked, func(i, j int) bool { return marked[i].n < marked[j].n })
	for _, m := range marked {
		if err := appendEvent(ctx, tx, store.Event{Run: ref.Run, Kind: store.EventAttemptUnknown, Task: ref.Task, Attempt: m.n},
			queue.UnknownPayload(m.tok, reason)); err != nil {
			return err
		}
	}
	return nil
}

// Workers implements queue.Queue. It reads in a transaction, so that a
// test's clock (pipec.now) judges liveness as it does everywhere else.
func (s *Store) Workers(ctx context.Context) ([]queue.WorkerRow, error) {
	var ws []queue.WorkerRow
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		ws, err = workers(ctx, tx)
		return err
	})
	return ws, err
}

func workers(ctx context.Context, q queryer) ([]queue.WorkerRow, error) {
	rows, err := q.Query(ctx, `SELECT name, host, pid, slots, labels, state, started, last_seen, expiry > pipec_now(),
	(EXTRACT(EPOCH FROM pipec_now() - last_seen) * 1000000)::bigint
FROM workers ORDER BY name COLLATE "C"`)
	if err != nil {
		return nil, err
	}
	ws, err := collect(rows, func(r pgx.Row) (queue.WorkerRow, error) {
		var w queue.WorkerRow
		var agoMicros int64
		if err := r.Scan(&w.Name, &w.Host, &w.PID, &w.Slots, &w.Labels, &w.State, &w.Started, &w.LastSeen, &w.Live, &agoMicros); err != nil {
			return w, err
		}
		w.Ago = time.Duration(agoMicros) * time.Microsecond
		if len(w.Labels) == 0 {
			w.Labels = nil
		}
		w.Started, w.LastSeen = w.Started.UTC(), w.LastSeen.UTC()
		return w, nil
	})
	if err != nil {
		return nil, err
	}
	wrows, err := q.Query(ctx, `SELECT w.run, w.task, w.state, w.worker, w.limits, w.failover FROM work w JOIN runs r ON r.id = w.run
WHERE r.state = 'running' ORDER BY w.run COLLATE "C", w.task COLLATE "C"`)
	if err != nil {
		return nil, err
	}
	work, err := collect(wrows, func(r pgx.Row) (queue.RunTask, error) {
		var x queue.RunTask
		var limits, st string
		if err := r.Scan(&x.Run, &x.Task, &x.State, &x.Worker, &limits, &st); err != nil {
			return x, err
		}
		return x, queue.DecodeStatus(&x.TaskStatus, limits, st)
	})
	if err != nil {
		return nil, err
	}
	queue.AttachWork(ws, work)
	return ws, nil
}
