package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// Submitted implements queue.Queue.
func (s *Store) Submitted(ctx context.Context, run string) (queue.SubmittedRun, error) {
	var plan string
	var sr queue.SubmittedRun
	err := s.read().QueryRow(ctx, `SELECT s.plan, s.base_dir, s.interval_value, r.forced FROM submissions s JOIN runs r ON r.id = s.run
WHERE s.run = $1`, run).Scan(&plan, &sr.BaseDir, &sr.Interval, &sr.Forced)
	if errors.Is(err, pgx.ErrNoRows) {
		return sr, fmt.Errorf("run %s was not submitted to workers: %w", run, store.ErrNotFound)
	}
	sr.Plan = []byte(plan)
	return sr, err
}

// Status implements queue.Queue.
func (s *Store) Status(ctx context.Context, run string) (queue.RunStatus, error) {
	return s.status(ctx, run, nil)
}

var _ queue.StatusFollower = (*Store)(nil)

// FollowStatus implements queue.StatusFollower: a row's columns are
// compared as the server sends them, and decoded only when they changed.
func (s *Store) FollowStatus(ctx context.Context, run string, memo *queue.StatusMemo) (queue.RunStatus, error) {
	if memo == nil {
		memo = new(queue.StatusMemo)
	}
	return s.status(ctx, run, memo)
}

// statusSQL reads the tasks of a run ($1) for Status.
const statusSQL = `SELECT task, state, worker, reason, limits, failover FROM work WHERE run = $1 ORDER BY task COLLATE "C"`

// status is Status, or with memo FollowStatus.
func (s *Store) status(ctx context.Context, run string, memo *queue.StatusMemo) (queue.RunStatus, error) {
	// The run, its waiting message and its tasks in one round trip (a
	// follower reads them at every look).
	var rs queue.RunStatus
	since := int64(-1)
	if memo != nil {
		memo.Read(run)
		if m, err := strconv.ParseInt(memo.Mark(), 10, 64); err == nil {
			since = m
		}
		memo.Marked("")
	}
	// Sent again, as reads are, when it failed before its first row: the
	// follower's memo has taken nothing of it yet.
	var br pgx.BatchResults
	var r store.Run
	err := s.reading(ctx, func() error {
		b := &pgx.Batch{}
		b.Queue(`SELECT `+runColumns+` FROM runs WHERE id = $1`, run)
		b.Queue(`SELECT waiting FROM submissions WHERE run = $1`, run)
		if memo != nil {
			b.Queue(followSQL, run, since)
		} else {
			b.Queue(statusSQL, run)
		}
		br = s.pool.SendBatch(ctx, b)
		var err error
		if r, err = scanRun(br.QueryRow()); err != nil {
			br.Close()
		}
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return rs, fmt.Errorf("run %q: %w", run, store.ErrNotFound)
	}
	if err != nil {
		return rs, err
	}
	defer br.Close()
	rs.Run = r
	err = br.QueryRow().Scan(&rs.Waiting)
	if errors.Is(err, pgx.ErrNoRows) {
		return rs, fmt.Errorf("run %s was not submitted to workers: %w", run, store.ErrNotFound)
	}
	if err != nil {
		return rs, err
	}
	rows, err := br.Query()
	if err != nil {
		return rs, err
	}
	if memo != nil {
		rs.Tasks, err = followTasks(rows, memo)
		return rs, err
	}
	var dec queue.Decoder
	rs.Tasks, err = collect(rows, func(r pgx.Row) (queue.TaskStatus, error) {
		var t queue.TaskStatus
		var limits, st string
		if err := r.Scan(&t.Task, &t.State, &t.Worker, &t.Reason, &limits, &st); err != nil {
			return t, err
		}
		return t, dec.Status(&t, limits, st)
	})
	return rs, err
}

// followSQL reads the tasks of a run ($1) written since a mark ($2, -1 for
// all of them), and the mark of this read, in one statement (so under one
// snapshot). The mark is the snapshot's xmin: every transaction below it
// had ended when the read began, so a row written after the read was
// written by a transaction at or above it. A row's writer is its xmin,
// widened to 64 bits against the snapshot's xmax (xmin is the low 32 bits
// of a transaction id no more than 2^31 below xmax). A row is read again
// when its writer is at or above the last mark: never missed, sometimes
// read twice (a writer that ended between two reads, or one of a
// transaction that stayed open across them), and the memo tells those
// apart. A run whose rows did not change reads one row: the mark, its
// task NULL.
const followSQL = `WITH s AS (
	SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS mark,
		pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS top
), w AS (
	SELECT task, state, worker, reason, limits, failover,
		s.top - ((s.top - xmin::text::bigint) & 4294967295) AS writer
	FROM work, s WHERE run = $1
)
SELECT s.mark::text, w.task, w.state, w.worker, w.reason, w.limits, w.failover
FROM s LEFT JOIN w ON w.writer >= $2`

// followTasks is every task of a run for FollowStatus, from followSQL's
// rows (the read status queued): the rows written since memo's mark read
// and decoded, the others the memo's. A failed read leaves no mark, so the
// next one reads every row.
func followTasks(rows pgx.Rows, memo *queue.StatusMemo) ([]queue.TaskStatus, error) {
	defer rows.Close()
	var mark string
	for rows.Next() {
		v := rows.RawValues() // text columns; the task's NULL (nil) when none changed
		mark = string(v[0])
		if v[1] == nil {
			continue
		}
		if _, err := memo.Row(v[1], v[2], v[3], v[4], v[5], v[6]); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	memo.Marked(mark)
	return memo.Tasks(), nil
}
