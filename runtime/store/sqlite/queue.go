package sqlite

// The worker queue (queue.Queue) on the SQLite store: several pipec worker
// processes on one machine sharing one state file, with pipec submit and
// pipec workers beside them.
//
// It makes the same decisions as the PostgreSQL queue, through the same
// functions (runtime/queue: queue.Choose, queue.Finished, queue.Expired,
// queue.Spread, queue.RunEnd); what differs is how the database is used:
//
//   - Locking: SQLite has no row locks and no SKIP LOCKED. Every claim,
//     finish and sweep is one write transaction of the store (BEGIN
//     IMMEDIATE, update), so they run one after another across
//     every handle and process of the file; a claim judges all ready tasks
//     with nothing changing under it. The lock is held for a few statements,
//     never while a task runs. A claim or sweep first asks a read-only
//     connection whether there is anything to take, so idle workers do not
//     queue for the write lock.
//   - Leases: a worker's lease and its claims' are on the store's lease clock
//     (CLOCK_BOOTTIME with the boot id, package clock), like the attempts':
//     a wall-clock step neither expires a live worker nor keeps a dead one
//     live, and after a reboot every lease of the boot before has expired. A
//     shared SQLite file is one machine by definition; CheckLocal
//     (which pipec worker, workers and submit call) refuses a file on a
//     network filesystem, where neither SQLite's locks nor one boot's clock
//     hold.
//   - Wakeups: there is no LISTEN/NOTIFY. Transactions that may make a task
//     ready bump a counter (work_signal); Wakeups polls PRAGMA data_version,
//     which changes when another connection commits and costs no read of
//     the database, and reads the counter only then; the poll backs off
//     while nothing commits. RunEnded watches run_end_signal the same way,
//     a counter every run's end bumps (a trigger on runs).

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

var _ queue.Queue = (*Store)(nil)

// DefaultWakeupPoll is how soon after a commit Wakeups polls PRAGMA
// data_version again; MaxWakeupPoll how seldom it polls a file nobody
// writes.
const (
	DefaultWakeupPoll = 10 * time.Millisecond
	MaxWakeupPoll     = 160 * time.Millisecond
)

// RunEndPoll is how soon after a commit RunEnded polls again: a follower
// hears a run's end within it. A busy file commits all the time, and the
// follower shares the machine with the workers: polled as often as
// Wakeups does, it added a quarter to pipec submit --wait's CPU on
// BenchmarkWorkers1kSQLite (0.20 to 0.25-0.26 s a run).
const RunEndPoll = 50 * time.Millisecond

// bumpSignal tells idle workers (Wakeups) that tasks may have become ready.
func bumpSignal(ctx context.Context, tx *queueTx) error {
	_, err := tx.Exec(ctx, `UPDATE work_signal SET n = n + 1 WHERE id = 1`)
	return err
}

// Submit implements queue.Queue.
func (s *Store) Submit(ctx context.Context, sub queue.Submission) (store.Run, error) {
	rows, err := queue.Plan(sub)
	if err != nil {
		return store.Run{}, err
	}
	var r store.Run
	err = s.update(ctx, func(ctx context.Context, tx *queueTx) error {
		var err error
		if r, err = tx.CreateRun(ctx, sub.Run); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO submissions (run, plan, base_dir, interval_value) VALUES (?, ?, ?, ?)`,
			r.ID, string(sub.Plan), sub.BaseDir, sub.Interval); err != nil {
			return err
		}
		for _, w := range rows {
			if _, err := tx.Exec(ctx, `INSERT INTO work (run, task, state, waiting_on, dependents, limits, labels, pool, pool_slots)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				r.ID, w.Task, w.State, w.WaitingOn, queue.JSON(w.Dependents), queue.JSON(w.Limits), queue.JSON(w.Labels), w.Pool, w.PoolSlots); err != nil {
				return err
			}
		}
		if err := bumpSignal(ctx, tx); err != nil {
			return err
		}
		return tx.AppendEvent(ctx, store.Event{Run: r.ID, Kind: queue.EventRunSubmitted}, map[string]any{"tasks": len(sub.Tasks)})
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("submit: %w", err)
	}
	return r, nil
}

// liveSQL is the condition of a live worker, given the lease clock's
// reading as ?1 (boot) and ?2 (nanos): clock.Expired in SQL.
const liveSQL = `state = 'live' AND expiry_boot = ?1 AND expiry_until > ?2`

// Register implements queue.Queue.
func (s *Store) Register(ctx context.Context, w queue.WorkerInfo, lease time.Duration) error {
	if w.Name == "" {
		return fmt.Errorf("register: a worker needs a name")
	}
	if lease <= 0 {
		return fmt.Errorf("register: the lease must be positive")
	}
	return s.update(ctx, func(ctx context.Context, tx *queueTx) error {
		now := s.lease()
		var host string
		var pid int
		var live bool
		err := tx.QueryRow(ctx, `SELECT host, pid, `+liveSQL+` FROM workers WHERE name = ?3`, now.Boot, now.Nanos, w.Name).Scan(&host, &pid, &live)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		replacing, err := queue.Registering(w, err == nil, host, pid, live)
		if err != nil {
			return err
		}
		if replacing {
			if _, err := tx.Exec(ctx, `UPDATE work SET claim_until = 0 WHERE worker = ? AND `+isClaimed, w.Name); err != nil {
				return err
			}
		}
		until := tx.LeaseUntil(lease)
		_, err = tx.Exec(ctx, `INSERT INTO workers (name, host, pid, slots, labels, state, started, last_seen, expiry_boot, expiry_until)
VALUES (?1, ?2, ?3, ?4, ?5, 'live', ?6, ?6, ?7, ?8)
ON CONFLICT (name) DO UPDATE SET host = excluded.host, pid = excluded.pid, slots = excluded.slots, labels = excluded.labels,
	state = 'live', started = excluded.started, last_seen = excluded.last_seen, expiry_boot = excluded.expiry_boot,
	expiry_until = excluded.expiry_until`,
			w.Name, w.Host, w.PID, w.Slots, queue.JSON(queue.NormalLabels(w.Labels)), tx.Now(), until.Boot, until.Nanos)
		return err
	})
}

// Heartbeat implements queue.Queue.
func (s *Store) Heartbeat(ctx context.Context, name string, lease time.Duration) ([]queue.Ref, error) {
	if lease <= 0 {
		return nil, fmt.Errorf("heartbeat: the lease must be positive")
	}
	var held []queue.Ref
	err := s.update(ctx, func(ctx context.Context, tx *queueTx) error {
		held = nil
		until := tx.LeaseUntil(lease)
		res, err := tx.Exec(ctx, `UPDATE workers SET last_seen = ?2, expiry_boot = ?3, expiry_until = ?4 WHERE name = ?1 AND state <> 'stopped'`,
			name, tx.Now(), until.Boot, until.Nanos)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("heartbeat: worker %s is not registered: %w", name, store.ErrNotFound)
		}
		// Only claims still live: one that expired (this worker was paused
		// or cut off) is lost, whether or not a sweep saw it yet.
		now := s.lease()
		if _, err := tx.Exec(ctx, `UPDATE work SET claim_boot = ?2, claim_until = ?3 WHERE worker = ?1 AND `+isClaimed+`
	AND claim_boot = ?4 AND claim_until > ?5`, name, until.Boot, until.Nanos, now.Boot, now.Nanos); err != nil {
			return err
		}
		held, err = collect(func(r *sql.Rows) (queue.Ref, error) {
			var ref queue.Ref
			return ref, r.Scan(&ref.Run, &ref.Task)
		})(tx.Query(ctx, `SELECT run, task FROM work WHERE worker = ?1 AND `+isClaimed+` AND claim_boot = ?2 AND claim_until = ?3
ORDER BY run, task`, name, until.Boot, until.Nanos))
		return err
	})
	return held, err
}

// Stopping implements queue.Queue.
func (s *Store) Stopping(ctx context.Context, name string) error {
	return s.update(ctx, func(ctx context.Context, tx *queueTx) error {
		_, err := tx.Exec(ctx, `UPDATE workers SET state = 'stopping' WHERE name = ? AND state = 'live'`, name)
		return err
	})
}

// Deregister implements queue.Queue.
func (s *Store) Deregister(ctx context.Context, name string) error {
	return s.update(ctx, func(ctx context.Context, tx *queueTx) error {
		_, err := tx.Exec(ctx, `UPDATE workers SET state = 'stopped', last_seen = ? WHERE name = ?`, tx.Now(), name)
		return err
	})
}

// collect reads every row of a query with scan, closing the rows. It is
// curried so that a query's results pass straight in:
// collect(scan)(tx.Query(…)).
func collect[T any](scan func(*sql.Rows) (T, error)) func(rows *sql.Rows, err error) ([]T, error) {
	return func(rows *sql.Rows, err error) ([]T, error) {
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []T
		for rows.Next() {
			v, err := scan(rows)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, rows.Err()
	}
}

// scanWork reads run, task, limits, failover, dependents, worker and labels.
func scanWork(r *sql.Rows) (queue.Work, error) {
	var w queue.Work
	var limits, st, deps, labels string
	if err := r.Scan(&w.Run, &w.Task, &limits, &st, &deps, &w.Worker, &labels); err != nil {
		return w, err
	}
	if err := json.Unmarshal([]byte(labels), &w.Labels); err != nil {
		return w, fmt.Errorf("work %s %s: labels: %w", w.Run, w.Task, err)
	}
	return w, queue.DecodeWork(&w, limits, st, deps)
}

// scanCandidates reads a claim's page of candidates (run, task, limits,
// failover, worker, labels, pool and its slots); their dependents are not
// read (queue.Decoder.Candidate).
func scanCandidates(rows *sql.Rows, err error) ([]queue.Work, error) {
	var dec queue.Decoder
	return collect(func(r *sql.Rows) (queue.Work, error) {
		var w queue.Work
		var limits, st, labels string
		if err := r.Scan(&w.Run, &w.Task, &limits, &st, &w.Worker, &labels, &w.Pool, &w.PoolSlots); err != nil {
			return w, err
		}
		if err := json.Unmarshal([]byte(labels), &w.Labels); err != nil {
			return w, fmt.Errorf("work %s %s: labels: %w", w.Run, w.Task, err)
		}
		return w, dec.Candidate(&w, limits, st)
	})(rows, err)
}

// poolsBusy fills in, for the candidates with a pool, how many of the
// pool's slots are taken now (poolBusy; busy caches the counts of the claim's
// earlier pages). The claim holds the file's write lock, so no other claim
// raises a count before this one commits.
func poolsBusy(ctx context.Context, tx *queueTx, cands []queue.Work, busy map[string]int) error {
	for _, k := range queue.Pools(cands) {
		if _, ok := busy[k]; ok {
			continue
		}
		n, err := poolBusy(ctx, tx, k, queue.Ref{}) // claimed rows and live holds (pools.go)
		if err != nil {
			return err
		}
		busy[k] = n
	}
	for i := range cands {
		if c := &cands[i]; c.Pool != "" {
			c.PoolBusy = busy[c.Pool]
		}
	}
	return nil
}

// exists reports, from a read that takes no lock, whether query finds a
// row: a claim or sweep with nothing to do then never queues for the write
// lock. A row that appears just after is found by the next poll or wakeup.
func (s *Store) exists(ctx context.Context, query string, args ...any) (bool, error) {
	var found bool
	err := s.queryRow(ctx, `SELECT EXISTS (`+query+`)`, args...).Scan(&found)
	return found, err
}

// claimPage is how many candidates a claim reads at a time.
const claimPage = 8

// offeredSQL is the condition "the task's labels (w.labels) are all among
// those of the JSON array ?1" (failover.Eligible), for the candidates of a
// claim.
const offeredSQL = `NOT EXISTS (SELECT 1 FROM json_each(w.labels) t WHERE t.value NOT IN (SELECT value FROM json_each(?1)))`

// unservedSQL selects, with the lease clock's reading as ?1 and ?2, the
// ready labelled tasks no live worker offers the labels of.
const unservedSQL = `SELECT w.run, w.task, w.labels FROM work w WHERE ` + isReady + ` AND json_array_length(w.labels) > 0
	AND NOT EXISTS (SELECT 1 FROM workers k WHERE k.state = 'live' AND k.expiry_boot = ?1 AND k.expiry_until > ?2
		AND NOT EXISTS (SELECT 1 FROM json_each(w.labels) t WHERE t.value NOT IN (SELECT value FROM json_each(k.labels))))
ORDER BY w.run, w.task LIMIT ?3`

// Claim implements queue.Queue: under the write lock, the ready tasks whose
// labels this worker offers (the first queue.ClaimCandidates, by run and
// task) are read, each with the live workers that offer its labels, and
// queue.Choose decides; the chosen task is claimed under a lease, and the
// runs whose tasks no live worker may start (or, when nothing was claimed,
// whose labelled tasks no live worker offers the labels of) say what they
// wait for.
func (s *Store) Claim(ctx context.Context, worker string, lease time.Duration) (*queue.Claim, error) {
	return s.claim(ctx, worker, lease, nil)
}

var _ queue.AttemptStarter = (*Store)(nil)

// ClaimStarting implements queue.AttemptStarter: Claim, and the claimed
// task's next attempt started (queued, with its token, as StartAttempt
// starts one) in the same write: one write, and one commit, fewer per task.
func (s *Store) ClaimStarting(ctx context.Context, worker string, lease time.Duration, spec store.AttemptSpec) (*queue.Claim, error) {
	return s.claim(ctx, worker, lease, &spec)
}

// claim is Claim; with start, it is ClaimStarting.
func (s *Store) claim(ctx context.Context, worker string, lease time.Duration, start *store.AttemptSpec) (*queue.Claim, error) {
	if lease <= 0 {
		return nil, fmt.Errorf("claim: the lease must be positive")
	}
	if ok, err := s.exists(ctx, `SELECT 1 FROM work WHERE `+isReady); err != nil || !ok {
		if err != nil {
			return nil, err
		}
		return nil, nil
	}
	var out *queue.Claim
	update := s.update
	if start != nil {
		update = s.updateGranting
	}
	err := update(ctx, func(ctx context.Context, tx *queueTx) error {
		var err error
		out, err = s.claimIn(ctx, tx, worker, lease, start)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// claimIn is claim's write in tx: the claim (nil when this worker may take
// no ready task) and, with start, its first attempt.
func (s *Store) claimIn(ctx context.Context, tx *queueTx, worker string, lease time.Duration, start *store.AttemptSpec) (*queue.Claim, error) {
	var out *queue.Claim
	now := s.lease()
	live, err := collect(func(r *sql.Rows) (queue.WorkerInfo, error) {
		var w queue.WorkerInfo
		var labels string
		if err := r.Scan(&w.Name, &labels); err != nil {
			return w, err
		}
		return w, json.Unmarshal([]byte(labels), &w.Labels)
	})(tx.Query(ctx, `SELECT name, labels FROM workers WHERE `+liveSQL+` ORDER BY name`, now.Boot, now.Nanos))
	if err != nil {
		return nil, err
	}
	me := slices.IndexFunc(live, func(w queue.WorkerInfo) bool { return w.Name == worker })
	if me < 0 {
		return nil, nil // not live (stopping, or its heartbeat lapsed): no claims
	}
	// The candidates are read a page at a time: Choose judges them in
	// order and stops at the first it claims (usually the first of
	// all), so decoding the rest would be wasted. Pages chosen from in
	// turn decide exactly what one slice of them all would.
	cs := queue.NewCandidates()
	busy := map[string]int{} // claimed tasks per pool, counted once per claim
	for len(cs.Work) < queue.ClaimCandidates {
		page, err := scanCandidates(tx.Query(ctx, `SELECT run, task, limits, failover, worker, labels, pool, pool_slots FROM work w
WHERE `+isReady+` AND `+offeredSQL+` ORDER BY run, task LIMIT ?2 OFFSET ?3`, queue.JSON(live[me].Labels), claimPage, len(cs.Work)))
		if err != nil {
			return nil, err
		}
		for i := range page {
			page[i].Live = queue.EligibleLive(page[i].Labels, live)
		}
		if err := poolsBusy(ctx, tx, page, busy); err != nil {
			return nil, err
		}
		chosen, err := cs.Judge(page, worker)
		if err != nil {
			return nil, err
		}
		if chosen || len(page) < claimPage {
			break
		}
	}
	cands, pick := cs.Work, &cs.Pick
	if pick.Chosen >= 0 {
		c := &cands[pick.Chosen]
		cl := &queue.Claim{Ref: c.Ref, Limits: c.Limits, Failover: c.Failover}
		until := tx.LeaseUntil(lease)
		if _, err := tx.Exec(ctx, `UPDATE work SET state = 'claimed', worker = ?3, failover = ?4, reason = '', claim_boot = ?5, claim_until = ?6
WHERE run = ?1 AND task = ?2`, c.Run, c.Task, worker, queue.JSON(c.Failover), until.Boot, until.Nanos); err != nil {
			return nil, err
		}
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(number), 0) FROM attempts WHERE run = ? AND task = ?`, c.Run, c.Task).Scan(&cl.AttemptBase); err != nil {
			return nil, err
		}
		// The run waits no more for this task; a message about another
		// task stays: that one still waits.
		if _, err := tx.Exec(ctx, `UPDATE submissions SET waiting = '' WHERE run = ?1 AND substr(waiting, 1, length(?2)) = ?2`,
			c.Run, queue.WaitingPrefix(c.Task)); err != nil {
			return nil, err
		}
		if err := tx.AppendEvent(ctx, store.Event{Run: c.Run, Kind: queue.EventWorkClaimed, Task: c.Task},
			queue.ClaimedPayload(c, worker)); err != nil {
			return nil, err
		}
		if start != nil {
			// As StartAttempt, queued; the resource is the run's
			// pipeline@interval, as the runtime names it (runtime.runner
			// resource). A run no longer running starts nothing here:
			// the visit's StartAttempt says so.
			var state, resource string
			if err := tx.QueryRow(ctx, `SELECT state, pipeline || '@' || interval_key FROM runs WHERE id = ?`, c.Run).Scan(&state, &resource); err != nil {
				return nil, err
			}
			if store.RunState(state) == store.RunRunning {
				a, err := tx.StartAttempt(ctx, store.AttemptSpec{Run: c.Run, Task: c.Task, Resource: resource,
					Worker: start.Worker, Host: start.Host, Boot: start.Boot, Queued: true})
				if err != nil {
					return nil, err
				}
				cl.Attempt = &a
			}
		}
		out = cl
	} else {
		unserved, err := collect(func(r *sql.Rows) (queue.Work, error) {
			var w queue.Work
			var labels string
			if err := r.Scan(&w.Run, &w.Task, &labels); err != nil {
				return w, err
			}
			return w, json.Unmarshal([]byte(labels), &w.Labels)
		})(tx.Query(ctx, unservedSQL, now.Boot, now.Nanos, queue.ClaimCandidates))
		if err != nil {
			return nil, err
		}
		pick.Unserved(unserved)
	}
	for _, w := range pick.Waiting {
		res, err := tx.Exec(ctx, `UPDATE submissions SET waiting = ?2
WHERE run = ?1 AND waiting <> ?2 AND (waiting = '' OR substr(waiting, 1, length(?3)) = ?3)`, w.Run, w.Message, queue.WaitingPrefix(w.Task))
		if err != nil {
			return nil, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, err
		} else if n == 1 {
			if err := tx.AppendEvent(ctx, store.Event{Run: w.Run, Kind: queue.EventRunWaiting}, map[string]any{"waiting": w.Message}); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Finish implements queue.Queue: queue.Finished decides, this writes it.
func (s *Store) Finish(ctx context.Context, worker string, ref queue.Ref, r queue.Result) error {
	if e := r.End; e != nil && (e.Ref.Run != ref.Run || e.Ref.Task != ref.Task) {
		return fmt.Errorf("finish %s %s: the attempt %s is not of this task", ref.Run, ref.Task, e.Ref)
	}
	lost := false
	update := s.update
	if finishDurable(r) {
		update = s.updateDurable // as FinishAttempt would commit it
	}
	err := update(ctx, func(ctx context.Context, tx *queueTx) error {
		var err error
		lost, err = finishIn(ctx, tx, worker, ref, r)
		return err
	})
	return finishErr(ref, worker, lost, err)
}

// finishDurable: the visit's last attempt's end asks to be kept through a
// power cut (store.Outcome.Synchronous).
func finishDurable(r queue.Result) bool {
	return r.End != nil && r.End.Outcome.Synchronous()
}

// finishErr is Finish's error: store.ErrLeaseLost when the claim was lost.
func finishErr(ref queue.Ref, worker string, lost bool, err error) error {
	if err == nil && lost {
		err = fmt.Errorf("%s %s is no longer %s's (its lease expired and the task was taken over): %w", ref.Run, ref.Task, worker, store.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("finish %s %s: %w", ref.Run, ref.Task, err)
	}
	return nil
}

var _ queue.FinishClaimer = (*Store)(nil)

// FinishClaiming implements queue.FinishClaimer: Finish and ClaimStarting
// in one write, so a worker that goes on claiming pays one commit, not two,
// between two tasks. A durable end commits alone first, as Finish commits
// it; a lost claim claims nothing.
func (s *Store) FinishClaiming(ctx context.Context, worker string, ref queue.Ref, r queue.Result, lease time.Duration, spec store.AttemptSpec) (*queue.Claim, error) {
	if finishDurable(r) {
		if err := s.Finish(ctx, worker, ref, r); err != nil {
			return nil, err
		}
		// The finish committed: a claim that fails now is no error of it
		// (the worker's next claim says what went wrong).
		next, err := s.ClaimStarting(ctx, worker, lease, spec)
		if err != nil {
			return nil, nil
		}
		return next, nil
	}
	if e := r.End; e != nil && (e.Ref.Run != ref.Run || e.Ref.Task != ref.Task) {
		return nil, fmt.Errorf("finish %s %s: the attempt %s is not of this task", ref.Run, ref.Task, e.Ref)
	}
	if lease <= 0 {
		return nil, fmt.Errorf("claim: the lease must be positive")
	}
	lost := false
	var out *queue.Claim
	err := s.updateGranting(ctx, func(ctx context.Context, tx *queueTx) error {
		var err error
		out = nil
		if lost, err = finishIn(ctx, tx, worker, ref, r); err != nil || lost {
			return err
		}
		out, err = s.claimIn(ctx, tx, worker, lease, &spec)
		return err
	})
	if err := finishErr(ref, worker, lost, err); err != nil {
		return nil, err
	}
	return out, nil
}

// finishIn is Finish's write in tx; lost: the claim is no longer worker's
// (the attempt's end is recorded all the same).
func finishIn(ctx context.Context, tx *queueTx, worker string, ref queue.Ref, r queue.Result) (lost bool, err error) {
	w := queue.Work{Ref: ref, Worker: worker}
	var limits, st, deps string
	err = tx.QueryRow(ctx, `SELECT limits, failover, dependents FROM work WHERE run = ? AND task = ? AND `+isClaimed+` AND worker = ?`,
		ref.Run, ref.Task, worker).Scan(&limits, &st, &deps)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, err
	}
	// The visit's last attempt's end commits with the visit's
	// (queue.Result.End); when the claim is gone it is still recorded,
	// unless the attempt is another now.
	if r.End != nil && errors.Is(err, sql.ErrNoRows) {
		var cur store.Attempt
		if terr := tx.QueryRow(ctx, `SELECT token, COALESCE(worker, '') FROM attempts WHERE run = ? AND task = ? AND number = ?`,
			r.End.Ref.Run, r.End.Ref.Task, r.End.Ref.Number).Scan(&cur.Token, &cur.Worker); terr == nil && r.End.Outcome.Another(cur, worker) {
			return true, nil
		}
	}
	if r.End != nil {
		if err := tx.FinishAttempt(ctx, r.End.Ref, r.End.Outcome); err != nil {
			return false, err
		}
	}
	if u := r.Unused; u != nil && u.Run == ref.Run && u.Task == ref.Task && (r.End == nil || r.End.Ref != *u) {
		// The claim's attempt that never ran (ClaimStarting): it ends
		// failed, as an attempt that could not start does.
		if err := finishUnused(ctx, tx, *u); err != nil {
			return false, err
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	if err := queue.DecodeWork(&w, limits, st, deps); err != nil {
		return false, err
	}
	c, err := queue.Finished(&w, worker, r)
	if err != nil {
		return false, err
	}
	if err := applyChange(ctx, tx, &w, c); err != nil {
		return false, err
	}
	if c.Advance && len(w.Dependents) > 0 {
		return false, nil // its dependents are still to run: the run goes on
	}
	return false, maybeFinishRun(ctx, tx, ref.Run)
}

// finishUnused ends a claim's attempt that its visit never ran
// (queue.Result.Unused), still queued, failed as an attempt that could not
// start; one no longer queued (marked unknown meanwhile) stays as it is.
func finishUnused(ctx context.Context, tx *queueTx, ref store.AttemptRef) error {
	var state string
	err := tx.QueryRow(ctx, `SELECT state FROM attempts WHERE run = ? AND task = ? AND number = ?`, ref.Run, ref.Task, ref.Number).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && store.AttemptState(state) != store.AttemptQueued) {
		return nil
	}
	if err != nil {
		return err
	}
	return tx.FinishAttempt(ctx, ref, queue.UnusedOutcome())
}

// applyChange writes what a visit's end (or its claim's expiry) decided:
// the task's row and events, then its dependents' counts or the spread of
// its failure, and a wakeup.
func applyChange(ctx context.Context, tx *queueTx, w *queue.Work, c queue.Change) error {
	if _, err := tx.Exec(ctx, `UPDATE work SET state = ?3, failover = ?4, reason = ?5, worker = CASE WHEN ?3 = 'ready' THEN '' ELSE worker END,
	claim_boot = '', claim_until = 0 WHERE run = ?1 AND task = ?2`, w.Run, w.Task, c.State, queue.JSON(w.Failover), c.Reason); err != nil {
		return err
	}
	for _, n := range c.Notes {
		if err := tx.AppendEvent(ctx, store.Event{Run: w.Run, Kind: n.Kind, Task: w.Task}, n.Payload); err != nil {
			return err
		}
	}
	if c.Advance && len(w.Dependents) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE work SET waiting_on = waiting_on - 1,
	state = CASE WHEN waiting_on = 1 AND state = 'blocked' THEN 'ready' ELSE state END
WHERE run = ? AND task IN (SELECT value FROM json_each(?))`, w.Run, queue.JSON(w.Dependents)); err != nil {
			return err
		}
	}
	if c.Spread != "" {
		err := queue.Spread(w.Task, w.Dependents, c.Spread, func(task, why string) ([]string, bool, error) {
			var deps string
			err := tx.QueryRow(ctx, `UPDATE work SET state = 'not_run', reason = ?3 WHERE run = ?1 AND task = ?2 AND state = 'blocked'
RETURNING dependents`, w.Run, task, why).Scan(&deps)
			if errors.Is(err, sql.ErrNoRows) {
				return nil, false, nil
			}
			if err != nil {
				return nil, false, err
			}
			if err := tx.AppendEvent(ctx, store.Event{Run: w.Run, Kind: queue.EventWorkNotRun, Task: task}, queue.NotRunPayload(why)); err != nil {
				return nil, false, err
			}
			var next []string
			return next, true, json.Unmarshal([]byte(deps), &next)
		})
		if err != nil {
			return err
		}
	}
	return bumpSignal(ctx, tx)
}

// maybeFinishRun finishes the run when none of its tasks is left to do
// (queue.RunEnd).
func maybeFinishRun(ctx context.Context, tx *queueTx, run string) error {
	// Two probes of the (run, state) index: whether any task is open, and
	// whether any failed (queue.RunEnd needs no more than that).
	var open, bad int
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM work WHERE run = ?1 AND state IN ('blocked', 'ready', 'claimed')),
	EXISTS (SELECT 1 FROM work WHERE run = ?1 AND state IN ('failed', 'not_run'))`, run).Scan(&open, &bad); err != nil {
		return err
	}
	state, over := queue.RunEnd(open, bad)
	if !over {
		return nil
	}
	res, err := tx.Exec(ctx, `UPDATE runs SET state = ?2, finished = ?3 WHERE id = ?1 AND state = 'running'`, run, string(state), tx.Now())
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE submissions SET waiting = '' WHERE run = ?`, run); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM run_leases WHERE run = ?`, run); err != nil {
		return err
	}
	return tx.AppendEvent(ctx, store.Event{Run: run, Kind: store.EventRunFinished}, map[string]any{"state": string(state)})
}

// expiredSQL selects the claims whose lease expired on the lease clock
// (?1 boot, ?2 nanos): of another boot, or run out.
const expiredSQL = isClaimed + ` AND (claim_boot <> ?1 OR claim_until <= ?2)`

// isReady and isClaimed select ready and claimed work through the partial
// index work_open. SQLite uses a partial index only for a query that repeats
// its WHERE term (it does not infer state IN ('ready', 'claimed') from
// state = 'ready'); without it every claim scanned every task of every run.
const (
	isReady   = `state IN ('ready', 'claimed') AND state = 'ready'`
	isClaimed = `state IN ('ready', 'claimed') AND state = 'claimed'`
)

// Sweep implements queue.Queue: a claim whose lease expired belongs to a
// worker that stopped renewing (SIGSTOP, SIGKILL); the model treats it as a
// lost lease (queue.Expired).
func (s *Store) Sweep(ctx context.Context) (int, error) {
	now := s.lease()
	if ok, err := s.exists(ctx, `SELECT 1 FROM work WHERE `+expiredSQL, now.Boot, now.Nanos); err != nil || !ok {
		if err != nil {
			return 0, fmt.Errorf("sweep: %w", err)
		}
		return 0, nil
	}
	n := 0
	err := s.update(ctx, func(ctx context.Context, tx *queueTx) error {
		n = 0
		now := s.lease()
		expired, err := collect(scanWork)(tx.Query(ctx, `SELECT run, task, limits, failover, dependents, worker, labels FROM work WHERE `+expiredSQL+`
ORDER BY run, task`, now.Boot, now.Nanos))
		if err != nil {
			return err
		}
		for i := range expired {
			w := &expired[i]
			c := queue.Expired(w)
			if err := applyChange(ctx, tx, w, c); err != nil {
				return err
			}
			if c.Unknown != "" {
				if err := tx.UnknownAttempts(ctx, w.Run, w.Task, func(tok int64) map[string]any { return queue.UnknownPayload(tok, c.Unknown) }); err != nil {
					return err
				}
			}
			if err := maybeFinishRun(ctx, tx, w.Run); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	return n, nil
}

// Workers implements queue.Queue.
func (s *Store) Workers(ctx context.Context) ([]queue.WorkerRow, error) {
	db := s.r
	now, wall := s.lease(), s.now()
	ws, err := collect(func(r *sql.Rows) (queue.WorkerRow, error) {
		var w queue.WorkerRow
		var labels string
		var started, seen int64
		if err := r.Scan(&w.Name, &w.Host, &w.PID, &w.Slots, &labels, &w.State, &started, &seen, &w.Live); err != nil {
			return w, err
		}
		if err := json.Unmarshal([]byte(labels), &w.Labels); err != nil {
			return w, err
		}
		if len(w.Labels) == 0 {
			w.Labels = nil
		}
		w.Started, w.LastSeen = time.Unix(0, started).UTC(), time.Unix(0, seen).UTC()
		w.Ago = max(time.Duration(wall-seen), 0)
		return w, nil
	})(db.QueryContext(ctx, `SELECT name, host, pid, slots, labels, state, started, last_seen, `+liveSQL+`
FROM workers ORDER BY name`, now.Boot, now.Nanos))
	if err != nil {
		return nil, err
	}
	work, err := collect(func(r *sql.Rows) (queue.RunTask, error) {
		var x queue.RunTask
		var limits, st string
		if err := r.Scan(&x.Run, &x.Task, &x.State, &x.Worker, &limits, &st); err != nil {
			return x, err
		}
		return x, queue.DecodeStatus(&x.TaskStatus, limits, st)
	})(db.QueryContext(ctx, `SELECT w.run, w.task, w.state, w.worker, w.limits, w.failover FROM work w JOIN runs r ON r.id = w.run
WHERE r.state = 'running' ORDER BY w.run, w.task`))
	if err != nil {
		return nil, err
	}
	queue.AttachWork(ws, work)
	return ws, nil
}

// Submitted implements queue.Queue.
func (s *Store) Submitted(ctx context.Context, run string) (queue.SubmittedRun, error) {
	var plan string
	var sr queue.SubmittedRun
	err := s.queryRow(ctx, `SELECT s.plan, s.base_dir, s.interval_value, r.forced FROM submissions s JOIN runs r ON r.id = s.run
WHERE s.run = ?`, run).Scan(&plan, &sr.BaseDir, &sr.Interval, &sr.Forced)
	if errors.Is(err, sql.ErrNoRows) {
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
// compared as read (sql.RawBytes), and decoded only when they changed.
func (s *Store) FollowStatus(ctx context.Context, run string, memo *queue.StatusMemo) (queue.RunStatus, error) {
	if memo == nil {
		memo = new(queue.StatusMemo)
	}
	return s.status(ctx, run, memo)
}

// status is Status, or with memo FollowStatus.
func (s *Store) status(ctx context.Context, run string, memo *queue.StatusMemo) (queue.RunStatus, error) {
	var rs queue.RunStatus
	r, err := s.GetRun(ctx, run)
	if err != nil {
		return rs, err
	}
	rs.Run = r
	db := s.r
	err = db.QueryRowContext(ctx, `SELECT waiting FROM submissions WHERE run = ?`, run).Scan(&rs.Waiting)
	if errors.Is(err, sql.ErrNoRows) {
		return rs, fmt.Errorf("run %s was not submitted to workers: %w", run, store.ErrNotFound)
	}
	if err != nil {
		return rs, err
	}
	const tasks = `SELECT task, state, worker, reason, limits, failover FROM work WHERE run = ? ORDER BY task`
	if memo != nil {
		memo.Read(run)
		var c [6]sql.RawBytes
		rs.Tasks, err = collect(func(r *sql.Rows) (queue.TaskStatus, error) {
			if err := r.Scan(&c[0], &c[1], &c[2], &c[3], &c[4], &c[5]); err != nil {
				return queue.TaskStatus{}, err
			}
			return memo.Row(c[0], c[1], c[2], c[3], c[4], c[5])
		})(db.QueryContext(ctx, tasks, run))
		return rs, err
	}
	var dec queue.Decoder
	rs.Tasks, err = collect(func(r *sql.Rows) (queue.TaskStatus, error) {
		var t queue.TaskStatus
		var limits, st string
		if err := r.Scan(&t.Task, &t.State, &t.Worker, &t.Reason, &limits, &st); err != nil {
			return t, err
		}
		return t, dec.Status(&t, limits, st)
	})(db.QueryContext(ctx, tasks, run))
	return rs, err
}

// Wakeups implements queue.Queue by watching the work signal.
func (s *Store) Wakeups(ctx context.Context) (<-chan struct{}, error) {
	return s.watch(ctx, `SELECT n FROM work_signal WHERE id = 1`, s.poll)
}

var _ queue.RunEnds = (*Store)(nil)

// RunEnded implements queue.RunEnds by watching the run end signal, which
// every run's end bumps: it tells of any run's end, which a follower of one
// run takes as "may have ended" and looks.
func (s *Store) RunEnded(ctx context.Context, _ string) (<-chan struct{}, error) {
	return s.watch(ctx, `SELECT n FROM run_end_signal WHERE id = 1`, max(s.poll, RunEndPoll))
}

// watch signals (coalescing) each change of the number the query counter
// reads, by polling PRAGMA data_version on one read connection held for
// ctx's lifetime (it changes when another connection committed, and reads
// nothing of the file but its shared-memory index), then the counter when
// it did. The poll starts at poll after every change and doubles while
// nothing commits, up to MaxWakeupPoll, so an idle watcher costs next to
// nothing and a busy file is watched closely.
func (s *Store) watch(ctx context.Context, counter string, poll time.Duration) (<-chan struct{}, error) {
	conn, err := s.r.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var dataVersion, signal *sql.Stmt
	read := func(st *sql.Stmt) (n int64, err error) {
		return n, st.QueryRowContext(ctx).Scan(&n)
	}
	dataVersion, err = conn.PrepareContext(ctx, `PRAGMA data_version`)
	if err == nil {
		signal, err = conn.PrepareContext(ctx, counter)
	}
	var version, last int64
	if err == nil {
		version, err = read(dataVersion)
	}
	if err == nil {
		last, err = read(signal)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	ch := make(chan struct{}, 1)
	go func() {
		defer close(ch)
		defer conn.Close()
		defer dataVersion.Close()
		defer signal.Close()
		delay := poll
		t := time.NewTimer(delay)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			v, err := read(dataVersion)
			if err != nil {
				return // ctx ended, or the file is gone: the watcher's poll goes on
			}
			if v == version {
				delay = min(2*delay, MaxWakeupPoll)
				t.Reset(delay)
				continue
			}
			version, delay = v, poll
			n, err := read(signal)
			if err != nil {
				return
			}
			if n != last {
				last = n
				select {
				case ch <- struct{}{}:
				default:
				}
			}
			t.Reset(delay)
		}
	}()
	return ch, nil
}
