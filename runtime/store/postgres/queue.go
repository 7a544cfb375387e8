package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pipec/pipec/internal/failover"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

var _ queue.Queue = (*Store)(nil)

// Events the queue records in a run's log.
const (
	EventWorkClaimed    = "work.claimed"
	EventWorkFailover   = "work.failover"
	EventWorkStopped    = "work.stopped"
	EventWorkHandedBack = "work.handed_back"
	EventWorkLeaseLost  = "work.lease_lost"
	EventWorkSucceeded  = "work.succeeded"
	EventWorkNotRun     = "work.not_run"
	EventRunWaiting     = "run.waiting"
)

// claimCandidates bounds how many ready tasks one Claim looks at.
const claimCandidates = 64

// Submit implements queue.Queue.
func (s *Store) Submit(ctx context.Context, sub queue.Submission) (store.Run, error) {
	if len(sub.Tasks) == 0 {
		return store.Run{}, fmt.Errorf("submit: the plan has no tasks")
	}
	dependents := map[string][]string{}
	known := map[string]bool{}
	for _, t := range sub.Tasks {
		known[t.Name] = true
	}
	for _, t := range sub.Tasks {
		for _, n := range t.Needs {
			if !known[n] {
				return store.Run{}, fmt.Errorf("submit: task %s needs %s, which the plan does not have", t.Name, n)
			}
			dependents[n] = append(dependents[n], t.Name)
		}
	}
	var r store.Run
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		if r, err = createRun(ctx, tx, sub.Run); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO submissions (run, plan, base_dir, interval_value) VALUES ($1, $2, $3, $4)`,
			r.ID, string(sub.Plan), sub.BaseDir, sub.Interval); err != nil {
			return err
		}
		for _, t := range sub.Tasks {
			state := queue.WorkBlocked
			if len(t.Needs) == 0 {
				state = queue.WorkReady
			}
			deps := dependents[t.Name]
			sort.Strings(deps)
			if _, err := tx.Exec(ctx, `INSERT INTO work (run, task, state, waiting_on, dependents, limits, labels) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
				r.ID, t.Name, state, len(t.Needs), mustJSON(deps), mustJSON(t.Limits), queue.NormalLabels(t.Labels)); err != nil {
				return err
			}
		}
		if err := notifyWork(ctx, tx); err != nil {
			return err
		}
		return appendEvent(ctx, tx, store.Event{Run: r.ID, Kind: "run.submitted"}, map[string]any{"tasks": len(sub.Tasks)})
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("submit: %w", err)
	}
	return r, nil
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with plain data
	}
	return string(b)
}

// Register implements queue.Queue.
func (s *Store) Register(ctx context.Context, w queue.WorkerInfo, lease time.Duration) error {
	if w.Name == "" {
		return fmt.Errorf("register: a worker needs a name")
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		var host string
		var pid int
		var live bool
		err := tx.QueryRow(ctx, `SELECT host, pid, state = 'live' AND expiry > pipec_now() FROM workers WHERE name = $1 FOR UPDATE`,
			w.Name).Scan(&host, &pid, &live)
		if err == nil && live && (host != w.Host || pid != w.PID) {
			return fmt.Errorf("register: worker %s is live already (host %s, pid %d): give another --name", w.Name, host, pid)
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO workers (name, host, pid, slots, labels, state, started, last_seen, expiry)
SELECT $1, $2, $3, $4, $5, 'live', n.now, n.now, n.now + $6::bigint * interval '1 microsecond' FROM (SELECT pipec_now() AS now) n
ON CONFLICT (name) DO UPDATE SET host = excluded.host, pid = excluded.pid, slots = excluded.slots, labels = excluded.labels,
	state = 'live', started = excluded.started, last_seen = excluded.last_seen, expiry = excluded.expiry`,
			w.Name, w.Host, w.PID, w.Slots, queue.NormalLabels(w.Labels), micros(lease))
		return err
	})
}

// Heartbeat implements queue.Queue.
func (s *Store) Heartbeat(ctx context.Context, name string, lease time.Duration) ([]queue.Ref, error) {
	var held []queue.Ref
	err := s.tx(ctx, func(tx pgx.Tx) error {
		held = nil
		tag, err := tx.Exec(ctx, `UPDATE workers SET last_seen = pipec_now(), expiry = pipec_now() + $2::bigint * interval '1 microsecond'
WHERE name = $1 AND state <> 'stopped'`, name, micros(lease))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("heartbeat: worker %s is not registered: %w", name, store.ErrNotFound)
		}
		rows, err := tx.Query(ctx, `UPDATE work SET claim_expiry = pipec_now() + $2::bigint * interval '1 microsecond'
WHERE worker = $1 AND state = 'claimed' RETURNING run, task`, name, micros(lease))
		if err != nil {
			return err
		}
		held, err = collect(rows, func(r pgx.Row) (queue.Ref, error) {
			var ref queue.Ref
			return ref, r.Scan(&ref.Run, &ref.Task)
		})
		return err
	})
	return held, err
}

// Stopping implements queue.Queue.
func (s *Store) Stopping(ctx context.Context, name string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE workers SET state = 'stopping' WHERE name = $1 AND state = 'live'`, name)
		return err
	})
}

// Deregister implements queue.Queue.
func (s *Store) Deregister(ctx context.Context, name string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE workers SET state = 'stopped', last_seen = pipec_now() WHERE name = $1`, name)
		return err
	})
}

// liveWorkers are the workers that may take work now, by name.
func liveWorkers(ctx context.Context, tx pgx.Tx) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT name FROM workers WHERE state = 'live' AND expiry > pipec_now() ORDER BY name COLLATE "C"`)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r pgx.Row) (string, error) {
		var n string
		return n, r.Scan(&n)
	})
}

// workRow is a locked row of work.
type workRow struct {
	queue.Ref
	limits     failover.Limits
	st         failover.State
	dependents []string
	worker     string
}

func (w *workRow) decode(limits, st, deps string) error {
	if err := json.Unmarshal([]byte(limits), &w.limits); err != nil {
		return fmt.Errorf("work %s %s: limits: %w", w.Run, w.Task, err)
	}
	if err := json.Unmarshal([]byte(st), &w.st); err != nil {
		return fmt.Errorf("work %s %s: failover state: %w", w.Run, w.Task, err)
	}
	if err := json.Unmarshal([]byte(deps), &w.dependents); err != nil {
		return fmt.Errorf("work %s %s: dependents: %w", w.Run, w.Task, err)
	}
	return nil
}

// lockSubmission serializes the decisions that finish tasks of one run, so
// the last one to finish sees every other and finishes the run.
func lockSubmission(ctx context.Context, tx pgx.Tx, run string) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM submissions WHERE run = $1 FOR UPDATE`, run).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("run %s was not submitted: %w", run, store.ErrNotFound)
	}
	return err
}

// Claim implements queue.Queue: ready tasks whose labels this worker offers
// are locked with FOR UPDATE SKIP LOCKED (workers claiming at once never wait
// on each other, and a worker never locks a task it may not run), and the
// first the failover model lets this worker start is claimed; the model
// reasons over the live workers that offer the task's labels. A task none of
// those may start makes its run visibly wait for a worker, and so does,
// when this worker found nothing to claim, a labelled task that no live
// worker offers the labels of.
func (s *Store) Claim(ctx context.Context, worker string, lease time.Duration) (*queue.Claim, error) {
	var out *queue.Claim
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out = nil
		// The workers able to run each candidate ride along (one round trip):
		// for a task without labels every live worker, computed once.
		rows, err := tx.Query(ctx, `WITH me AS (
	SELECT labels FROM workers WHERE name = $2 AND state = 'live' AND expiry > pipec_now()
)
SELECT w.run, w.task, w.limits, w.failover, w.dependents, w.labels,
	CASE WHEN cardinality(w.labels) = 0
		THEN ARRAY(SELECT name FROM workers WHERE state = 'live' AND expiry > pipec_now() ORDER BY name COLLATE "C")
		ELSE ARRAY(SELECT k.name FROM workers k WHERE k.state = 'live' AND k.expiry > pipec_now() AND k.labels @> w.labels
			ORDER BY k.name COLLATE "C") END
FROM work w, me WHERE w.state = 'ready' AND w.labels <@ me.labels
ORDER BY w.run COLLATE "C", w.task COLLATE "C" LIMIT $1 FOR UPDATE OF w SKIP LOCKED`, claimCandidates, worker)
		if err != nil {
			return err
		}
		type cand struct {
			workRow
			labels []string
			live   []string // the live workers offering its labels
		}
		cands, err := collect(rows, func(r pgx.Row) (cand, error) {
			var c cand
			var limits, st, deps string
			if err := r.Scan(&c.Run, &c.Task, &limits, &st, &deps, &c.labels, &c.live); err != nil {
				return c, err
			}
			return c, c.decode(limits, st, deps)
		})
		if err != nil {
			return err
		}
		waiting := map[string]string{}
		for _, c := range cands {
			if !slices.Contains(c.live, worker) {
				return nil // its heartbeat lapsed while the statement ran: no claims
			}
			if !c.st.CanStart(c.limits, worker, c.live) {
				if c.st.Waiting(c.limits, c.live) && waiting[c.Run] == "" {
					waiting[c.Run] = queue.WaitingMessage(c.Task, c.labels, c.limits, &c.st, false)
				}
				continue
			}
			if err := c.st.Start(c.limits, worker, c.live); err != nil {
				return err
			}
			cl := &queue.Claim{Ref: c.Ref, Limits: c.limits, Failover: c.st}
			if err := tx.QueryRow(ctx, `UPDATE work SET state = 'claimed', worker = $3, failover = $4, reason = '',
	claim_expiry = pipec_now() + $5::bigint * interval '1 microsecond' WHERE run = $1 AND task = $2
RETURNING (SELECT COALESCE(MAX(number), 0) FROM attempts a WHERE a.run = $1 AND a.task = $2)`,
				c.Run, c.Task, worker, mustJSON(c.st), micros(lease)).Scan(&cl.AttemptBase); err != nil {
				return err
			}
			// The run waits no more for this task (a data-modifying CTE
			// always runs), and the claim is logged, in one statement. A
			// message about another task stays: that one still waits.
			if _, err := tx.Exec(ctx, `WITH s AS (UPDATE submissions SET waiting = '' WHERE run = $1 AND left(waiting, length($5)) = $5)
INSERT INTO events (run, time, kind, task, attempt, payload) VALUES ($1, pipec_now(), $2, $3, 0, $4)`,
				c.Run, EventWorkClaimed, c.Task, mustJSON(map[string]any{
					"worker": worker, "start": c.st.Starts, "counts": c.st.Describe(c.limits, c.live)}), queue.WaitingPrefix(c.Task)); err != nil {
				return err
			}
			out = cl
			break
		}
		if out == nil {
			if err := unservedLabels(ctx, tx, worker, waiting); err != nil {
				return err
			}
		}
		for _, run := range sortedKeys(waiting) {
			task, _, _ := strings.Cut(strings.TrimPrefix(waiting[run], "task "), ":")
			tag, err := tx.Exec(ctx, `UPDATE submissions SET waiting = $2
WHERE run = $1 AND waiting <> $2 AND (waiting = '' OR left(waiting, length($3)) = $3)`, run, waiting[run], queue.WaitingPrefix(task))
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 1 {
				if err := appendEvent(ctx, tx, store.Event{Run: run, Kind: EventRunWaiting}, map[string]any{"waiting": waiting[run]}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return out, nil
}

// unservedLabels adds to waiting, for runs not in it yet, the first ready
// task whose labels no live worker offers ("waiting for a worker with labels
// spark (none is live)"). Only a live worker looks (one that found nothing
// to claim), and it locks nothing: the rows stay free for the worker that
// joins with those labels.
func unservedLabels(ctx context.Context, tx pgx.Tx, worker string, waiting map[string]string) error {
	rows, err := tx.Query(ctx, `SELECT w.run, w.task, w.labels FROM work w
WHERE w.state = 'ready' AND cardinality(w.labels) > 0
	AND EXISTS (SELECT 1 FROM workers WHERE name = $1 AND state = 'live' AND expiry > pipec_now())
	AND NOT EXISTS (SELECT 1 FROM workers k WHERE k.state = 'live' AND k.expiry > pipec_now() AND k.labels @> w.labels)
ORDER BY w.run COLLATE "C", w.task COLLATE "C" LIMIT $2`, worker, claimCandidates)
	if err != nil {
		return err
	}
	type unserved struct {
		run, task string
		labels    []string
	}
	us, err := collect(rows, func(r pgx.Row) (unserved, error) {
		var u unserved
		return u, r.Scan(&u.run, &u.task, &u.labels)
	})
	if err != nil {
		return err
	}
	for _, u := range us {
		if waiting[u.run] == "" {
			waiting[u.run] = queue.WaitingMessage(u.task, u.labels, failover.Limits{}, nil, true)
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Finish implements queue.Queue.
func (s *Store) Finish(ctx context.Context, worker string, ref queue.Ref, r queue.Result) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		// The submission's lock (every finish of the run after another) and
		// the claim's, in one statement.
		var w workRow
		w.Ref = ref
		var limits, st, deps string
		err := tx.QueryRow(ctx, `SELECT w.limits, w.failover, w.dependents FROM work w JOIN submissions s ON s.run = w.run
WHERE w.run = $1 AND w.task = $2 AND w.state = 'claimed' AND w.worker = $3 FOR UPDATE OF w, s`, ref.Run, ref.Task, worker).Scan(&limits, &st, &deps)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%s %s is no longer %s's (its lease expired and the task was taken over): %w", ref.Run, ref.Task, worker, store.ErrLeaseLost)
		}
		if err != nil {
			return err
		}
		if err := w.decode(limits, st, deps); err != nil {
			return err
		}
		switch r.Ending {
		case queue.Succeeded:
			// The task's state, its event, its dependents one need fewer
			// (ready at none), and a wakeup for idle workers when some became
			// ready: one statement.
			if _, err := tx.Exec(ctx, `WITH me AS (
	UPDATE work SET state = 'succeeded', failover = $4, reason = '', claim_expiry = NULL WHERE run = $1 AND task = $2
), ev AS (
	INSERT INTO events (run, time, kind, task, attempt, payload) VALUES ($1, pipec_now(), $5, $2, 0, $6)
), deps AS (
	UPDATE work SET waiting_on = waiting_on - 1,
		state = CASE WHEN waiting_on = 1 AND state = 'blocked' THEN 'ready' ELSE state END
	WHERE run = $1 AND task = ANY($3) RETURNING state
)
SELECT CASE WHEN count(*) FILTER (WHERE state = 'ready') > 0 THEN pg_notify('`+workChannel+`', '') END FROM deps`,
				ref.Run, ref.Task, w.dependents, mustJSON(w.st), EventWorkSucceeded, mustJSON(map[string]any{"worker": worker})); err != nil {
				return err
			}
			if len(w.dependents) > 0 {
				return nil // its dependents are still to run: the run goes on
			}
			return maybeFinishRun(ctx, tx, ref.Run)
		case queue.NotRun:
			if err := setWork(ctx, tx, ref, queue.WorkNotRun, &w.st, r.Reason); err != nil {
				return err
			}
			if err := spread(ctx, tx, ref.Run, ref.Task, w.dependents, "not run"); err != nil {
				return err
			}
		case queue.HandedBack:
			w.st.ShutDown(w.limits)
			if err := setWork(ctx, tx, ref, queue.WorkReady, &w.st, "handed back by "+worker+" (shutting down)"); err != nil {
				return err
			}
			if err := appendEvent(ctx, tx, store.Event{Run: ref.Run, Kind: EventWorkHandedBack, Task: ref.Task}, map[string]any{
				"worker": worker, "counts": w.st.Describe(w.limits, nil)}); err != nil {
				return err
			}
		case queue.Failed:
			if err := s.failedVisit(ctx, tx, &w, worker, w.st.Failed(w.limits, false, r.Deterministic), r.Reason); err != nil {
				return err
			}
		default:
			return fmt.Errorf("finish: unknown ending %d", r.Ending)
		}
		if err := notifyWork(ctx, tx); err != nil {
			return err
		}
		return maybeFinishRun(ctx, tx, ref.Run)
	})
	if err != nil {
		return fmt.Errorf("finish %s %s: %w", ref.Run, ref.Task, err)
	}
	return nil
}

// failedVisit applies the model's decision after a visit ended without
// success (failed, or its lease was lost).
func (s *Store) failedVisit(ctx context.Context, tx pgx.Tx, w *workRow, worker string, next failover.Next, reason string) error {
	switch next {
	case failover.Stop:
		why := reason
		if why == "" {
			why = "failed"
		}
		if !w.limits.NoFailover && w.limits.Global != failover.NoLimit && w.st.Failovers+1 > w.limits.Global {
			why += fmt.Sprintf("; stopped: another failover would exceed global = %d", w.limits.Global)
		}
		if err := setWork(ctx, tx, w.Ref, queue.WorkFailed, &w.st, why); err != nil {
			return err
		}
		if err := appendEvent(ctx, tx, store.Event{Run: w.Run, Kind: EventWorkStopped, Task: w.Task}, map[string]any{
			"worker": worker, "reason": why, "counts": w.st.Describe(w.limits, nil)}); err != nil {
			return err
		}
		return spread(ctx, tx, w.Run, w.Task, w.dependents, "failed")
	default:
		if err := setWork(ctx, tx, w.Ref, queue.WorkReady, &w.st, reason); err != nil {
			return err
		}
		return appendEvent(ctx, tx, store.Event{Run: w.Run, Kind: EventWorkFailover, Task: w.Task}, map[string]any{
			"from": worker, "reason": reason, "counts": w.st.Describe(w.limits, nil)})
	}
}

func setWork(ctx context.Context, tx pgx.Tx, ref queue.Ref, state string, st *failover.State, reason string) error {
	_, err := tx.Exec(ctx, `UPDATE work SET state = $3, failover = $4, reason = $5, worker = CASE WHEN $3 = 'ready' THEN '' ELSE worker END,
	claim_expiry = NULL WHERE run = $1 AND task = $2`, ref.Run, ref.Task, state, mustJSON(st), reason)
	return err
}

// spread marks every task downstream of a failed (or not run) one as not
// run, with the reason, as a local run does.
func spread(ctx context.Context, tx pgx.Tx, run, from string, dependents []string, how string) error {
	type item struct{ task, cause string }
	queueOf := []item{}
	for _, d := range dependents {
		queueOf = append(queueOf, item{d, from})
	}
	for len(queueOf) > 0 {
		it := queueOf[0]
		queueOf = queueOf[1:]
		var deps string
		why := fmt.Sprintf("needs %s, which %s", it.cause, how)
		if it.cause != from {
			why = fmt.Sprintf("needs %s, which was not run", it.cause)
		}
		err := tx.QueryRow(ctx, `UPDATE work SET state = 'not_run', reason = $3 WHERE run = $1 AND task = $2 AND state = 'blocked'
RETURNING dependents`, run, it.task, why).Scan(&deps)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return err
		}
		if err := appendEvent(ctx, tx, store.Event{Run: run, Kind: EventWorkNotRun, Task: it.task}, map[string]any{"reason": why}); err != nil {
			return err
		}
		var next []string
		if err := json.Unmarshal([]byte(deps), &next); err != nil {
			return err
		}
		for _, d := range next {
			queueOf = append(queueOf, item{d, it.task})
		}
	}
	return nil
}

// maybeFinishRun finishes the run when none of its tasks is left to do:
// failed when any failed or was not run. Called under lockSubmission.
func maybeFinishRun(ctx context.Context, tx pgx.Tx, run string) error {
	var open, bad int
	if err := tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state IN ('blocked', 'ready', 'claimed')),
	count(*) FILTER (WHERE state IN ('failed', 'not_run')) FROM work WHERE run = $1`, run).Scan(&open, &bad); err != nil {
		return err
	}
	if open > 0 {
		return nil
	}
	state := store.RunSucceeded
	if bad > 0 {
		state = store.RunFailed
	}
	tag, err := tx.Exec(ctx, `UPDATE runs SET state = $2, finished = pipec_now() WHERE id = $1 AND state = 'running'`, run, string(state))
	if err != nil || tag.RowsAffected() == 0 {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE submissions SET waiting = '' WHERE run = $1`, run); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM run_leases WHERE run = $1`, run); err != nil {
		return err
	}
	return appendEvent(ctx, tx, store.Event{Run: run, Kind: store.EventRunFinished}, map[string]any{"state": string(state)})
}

// Sweep implements queue.Queue: a claim whose lease expired belongs to a
// worker that stopped renewing (SIGSTOP, SIGKILL, a partition); the model
// treats it as a lost lease.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	n := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		n = 0
		rows, err := tx.Query(ctx, `SELECT run, task, limits, failover, dependents, worker FROM work
WHERE state = 'claimed' AND claim_expiry <= pipec_now() ORDER BY run COLLATE "C", task COLLATE "C" FOR UPDATE SKIP LOCKED`)
		if err != nil {
			return err
		}
		expired, err := collect(rows, func(r pgx.Row) (workRow, error) {
			var w workRow
			var limits, st, deps string
			if err := r.Scan(&w.Run, &w.Task, &limits, &st, &deps, &w.worker); err != nil {
				return w, err
			}
			return w, w.decode(limits, st, deps)
		})
		if err != nil {
			return err
		}
		for i := range expired {
			w := &expired[i]
			if err := lockSubmission(ctx, tx, w.Run); err != nil {
				return err
			}
			reason := "the lease of " + w.worker + " expired (no heartbeat): its attempt is unknown"
			if err := appendEvent(ctx, tx, store.Event{Run: w.Run, Kind: EventWorkLeaseLost, Task: w.Task}, map[string]any{
				"worker": w.worker}); err != nil {
				return err
			}
			if err := s.failedVisit(ctx, tx, w, w.worker, w.st.LeaseLost(w.limits), reason); err != nil {
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

// Workers implements queue.Queue.
func (s *Store) Workers(ctx context.Context) ([]queue.WorkerRow, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, host, pid, slots, labels, state, started, last_seen, expiry > pipec_now(),
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
	byName := map[string]*queue.WorkerRow{}
	for i := range ws {
		byName[ws[i].Name] = &ws[i]
	}
	wrows, err := s.pool.Query(ctx, `SELECT w.run, w.task, w.state, w.worker, w.limits, w.failover FROM work w JOIN runs r ON r.id = w.run
WHERE r.state = 'running' ORDER BY w.run COLLATE "C", w.task COLLATE "C"`)
	if err != nil {
		return nil, err
	}
	type wr struct {
		run, task, state, worker string
		l                        failover.Limits
		st                       failover.State
	}
	work, err := collect(wrows, func(r pgx.Row) (wr, error) {
		var x wr
		var limits, st string
		if err := r.Scan(&x.run, &x.task, &x.state, &x.worker, &limits, &st); err != nil {
			return x, err
		}
		if err := json.Unmarshal([]byte(limits), &x.l); err != nil {
			return x, err
		}
		return x, json.Unmarshal([]byte(st), &x.st)
	})
	if err != nil {
		return nil, err
	}
	for _, x := range work {
		if w := byName[x.worker]; w != nil && x.state == queue.WorkClaimed {
			w.Running = append(w.Running, x.run+" "+x.task)
		}
		for name, v := range x.st.Visits {
			w := byName[name]
			if w == nil || x.l.NoFailover {
				continue
			}
			of := "unlimited"
			if x.l.PerWorker > 0 {
				of = fmt.Sprint(x.l.PerWorker)
			}
			w.Failover = append(w.Failover, fmt.Sprintf("%s %s: %d of %s", x.run, x.task, v, of))
		}
	}
	return ws, nil
}

// Submitted implements queue.Queue.
func (s *Store) Submitted(ctx context.Context, run string) ([]byte, string, string, error) {
	var plan, base, iv string
	err := s.pool.QueryRow(ctx, `SELECT plan, base_dir, interval_value FROM submissions WHERE run = $1`, run).Scan(&plan, &base, &iv)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", "", fmt.Errorf("run %s was not submitted to workers: %w", run, store.ErrNotFound)
	}
	return []byte(plan), base, iv, err
}

// Status implements queue.Queue.
func (s *Store) Status(ctx context.Context, run string) (queue.RunStatus, error) {
	var rs queue.RunStatus
	r, err := s.GetRun(ctx, run)
	if err != nil {
		return rs, err
	}
	rs.Run = r
	err = s.pool.QueryRow(ctx, `SELECT waiting FROM submissions WHERE run = $1`, run).Scan(&rs.Waiting)
	if errors.Is(err, pgx.ErrNoRows) {
		return rs, fmt.Errorf("run %s was not submitted to workers: %w", run, store.ErrNotFound)
	}
	if err != nil {
		return rs, err
	}
	rows, err := s.pool.Query(ctx, `SELECT task, state, worker, reason, limits, failover FROM work WHERE run = $1 ORDER BY task COLLATE "C"`, run)
	if err != nil {
		return rs, err
	}
	rs.Tasks, err = collect(rows, func(r pgx.Row) (queue.TaskStatus, error) {
		var t queue.TaskStatus
		var limits, st string
		if err := r.Scan(&t.Task, &t.State, &t.Worker, &t.Reason, &limits, &st); err != nil {
			return t, err
		}
		if err := json.Unmarshal([]byte(limits), &t.Limits); err != nil {
			return t, err
		}
		return t, json.Unmarshal([]byte(st), &t.Failover)
	})
	return rs, err
}

// workChannel is the NOTIFY channel of "tasks may be ready".
const workChannel = "pipec_work"

// notifyWork wakes the listening workers when the transaction commits
// (PostgreSQL delivers notifications at commit and folds duplicates).
func notifyWork(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify('`+workChannel+`', '')`)
	return err
}

// Wakeups implements queue.Queue with LISTEN on one connection held for
// ctx's lifetime.
func (s *Store) Wakeups(ctx context.Context) (<-chan struct{}, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `LISTEN `+workChannel); err != nil {
		conn.Release()
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
			if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
				return // ctx ended, or the connection broke: the poll goes on
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return ch, nil
}
