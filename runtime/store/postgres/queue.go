package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

var _ queue.Queue = (*Store)(nil)

// Events the queue records in a run's log (the names are queue's).
const (
	EventWorkClaimed    = queue.EventWorkClaimed
	EventWorkFailover   = queue.EventWorkFailover
	EventWorkStopped    = queue.EventWorkStopped
	EventWorkHandedBack = queue.EventWorkHandedBack
	EventWorkLeaseLost  = queue.EventWorkLeaseLost
	EventWorkSucceeded  = queue.EventWorkSucceeded
	EventWorkNotRun     = queue.EventWorkNotRun
	EventRunWaiting     = queue.EventRunWaiting
)

// Submit implements queue.Queue; a synchronous commit, as CreateRun.
func (s *Store) Submit(ctx context.Context, sub queue.Submission) (store.Run, error) {
	rows, err := queue.Plan(sub)
	if err != nil {
		return store.Run{}, err
	}
	r, err := s.creating(ctx, func(tx pgx.Tx, ends *txEnds) (store.Run, error) {
		writes := &pgx.Batch{}
		r, n, err := createRun(ctx, tx, ends, sub.Run, writes)
		if err != nil {
			return r, err
		}
		writes.Queue(`INSERT INTO submissions (run, plan, base_dir, interval_value) VALUES ($1, $2, $3, $4)`,
			r.ID, string(sub.Plan), sub.BaseDir, sub.Interval)
		// The tasks' rows in one statement, a column an array (an INSERT
		// a task cost a round trip apiece, then a COPY two of its own).
		queueWork(writes, r.ID, rows)
		writes.Queue(notifyWorkSQL)
		payload, err := store.PayloadText(map[string]any{"tasks": len(sub.Tasks)})
		if err != nil {
			return r, err
		}
		writes.Queue(insertEventSQL, r.ID, queue.EventRunSubmitted, "", 0, payload)
		err = sendCreating(ctx, tx, ends, writes, &r, n) // fills r.Created
		return r, err
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("submit: %w", err)
	}
	return r, nil
}

// queueWork queues the insert of a submitted run's tasks (queue.Plan) on b.
// Each column is an array; a task's labels, a list of their own, go as
// JSON text.
func queueWork(b *pgx.Batch, run string, rows []queue.NewWork) {
	n := len(rows)
	task, state, deps, limits, labels, pool := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n)
	waiting, slots := make([]int32, n), make([]int32, n)
	for i, w := range rows {
		task[i], state[i], deps[i], limits[i], pool[i] = w.Task, w.State, queue.JSON(w.Dependents), queue.JSON(w.Limits), w.Pool
		labels[i] = "[]"
		if len(w.Labels) > 0 {
			labels[i] = queue.JSON(w.Labels)
		}
		waiting[i], slots[i] = int32(w.WaitingOn), int32(w.PoolSlots)
	}
	b.Queue(`INSERT INTO work (run, task, state, waiting_on, dependents, limits, labels, pool, pool_slots)
SELECT $1, t.task, t.state, t.waiting_on, t.dependents, t.limits,
	ARRAY(SELECT l FROM jsonb_array_elements_text(t.labels::jsonb) WITH ORDINALITY AS x(l, i) ORDER BY i), t.pool, t.pool_slots
FROM unnest($2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::text[], $8::text[], $9::int[])
	AS t(task, state, waiting_on, dependents, limits, labels, pool, pool_slots)`,
		run, task, state, waiting, deps, limits, labels, pool, slots)
}

// sendCreating sends writes, the last batch of a transaction whose first
// n statements are createRun's, with the COMMIT, and reads the results.
func sendCreating(ctx context.Context, tx pgx.Tx, ends *txEnds, writes *pgx.Batch, r *store.Run, n int) error {
	return sendLastReading(ctx, tx, ends, writes, n, func(br pgx.BatchResults) error { return readCreated(br, r, n) })
}
