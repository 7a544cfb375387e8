package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

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

// Submit implements queue.Queue.
func (s *Store) Submit(ctx context.Context, sub queue.Submission) (store.Run, error) {
	rows, err := queue.Plan(sub)
	if err != nil {
		return store.Run{}, err
	}
	var r store.Run
	err = s.txPipelined(ctx, func(tx pgx.Tx, ends *txEnds) error {
		writes := &pgx.Batch{}
		var err error
		var n int
		if r, n, err = createRun(ctx, tx, ends, sub.Run, writes); err != nil {
			return err
		}
		writes.Queue(`INSERT INTO submissions (run, plan, base_dir, interval_value) VALUES ($1, $2, $3, $4)`,
			r.ID, string(sub.Plan), sub.BaseDir, sub.Interval)
		// The tasks' rows in one statement, a column an array (an INSERT
		// a task cost a round trip apiece, then a COPY two of its own).
		queueWork(writes, r.ID, rows)
		writes.Queue(notifyWorkSQL)
		payload, err := store.PayloadText(map[string]any{"tasks": len(sub.Tasks)})
		if err != nil {
			return err
		}
		writes.Queue(insertEventSQL, r.ID, queue.EventRunSubmitted, "", 0, payload)
		return sendCreating(ctx, tx, ends, writes, &r, n)
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
		skip := ends.first(b)
		ends.last(b)
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		for range skip {
			if _, err := br.Exec(); err != nil {
				return err
			}
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
		skip := ends.first(b)
		ends.last(b)
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		for range skip {
			if _, err := br.Exec(); err != nil {
				return err
			}
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

// poolsBusy fills in, for the candidates with a pool, how many of the
// pool's slots are taken now (poolsBusySQL). Each pool is locked first, with a
// transaction-scoped advisory lock that is tried, never waited for: the
// claims that may raise a pool's count take it one at a time, so the count
// (a fresh snapshot under READ COMMITTED, after the lock) sees every claim
// committed before, and two workers never both take its last slot. A pool
// another claim holds is passed over (PoolLocked), as SKIP LOCKED passes
// over a locked row; finishes and expiries only lower a count and take no
// lock.
func poolsBusy(ctx context.Context, tx pgx.Tx, cands []queue.Work) error {
	keys := queue.Pools(cands)
	if len(keys) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT k, pg_try_advisory_xact_lock(hashtextextended('pool' || chr(31) || k, 0)) FROM unnest($1::text[]) k`, keys)
	if err != nil {
		return err
	}
	locked := map[string]bool{}
	type got struct {
		key string
		ok  bool
	}
	gs, err := collect(rows, func(r pgx.Row) (got, error) {
		var g got
		return g, r.Scan(&g.key, &g.ok)
	})
	if err != nil {
		return err
	}
	var mine []string
	for _, g := range gs {
		if g.ok {
			mine = append(mine, g.key)
		} else {
			locked[g.key] = true
		}
	}
	busy := map[string]int{}
	if len(mine) > 0 {
		rows, err := tx.Query(ctx, poolsBusySQL, mine, "", "") // claimed rows and live holds (pools.go)
		if err != nil {
			return err
		}
		type n struct {
			key string
			n   int
		}
		ns, err := collect(rows, func(r pgx.Row) (n, error) {
			var x n
			return x, r.Scan(&x.key, &x.n)
		})
		if err != nil {
			return err
		}
		for _, x := range ns {
			busy[x.key] = x.n
		}
	}
	for i := range cands {
		if c := &cands[i]; c.Pool != "" && c.PoolSlots > 0 {
			c.PoolLocked, c.PoolBusy = locked[c.Pool], busy[c.Pool]
		}
	}
	return nil
}

// lockSubmission serializes the decisions that finish tasks of one run, so
// the last one to finish sees every other and finishes the run.
func lockSubmission(ctx context.Context, tx pgx.Tx, run string) error {
	return scanSubmissionLock(tx.QueryRow(ctx, lockSubmissionSQL, run), run)
}

// lockSubmissionSQL locks a run's ($1) submission row (lockSubmission).
const lockSubmissionSQL = `SELECT 1 FROM submissions WHERE run = $1 FOR UPDATE`

// scanSubmissionLock reads the row of lockSubmissionSQL: none means the
// run was not submitted.
func scanSubmissionLock(row pgx.Row, run string) error {
	var one int
	err := row.Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("run %s was not submitted: %w", run, store.ErrNotFound)
	}
	return err
}

// Claim implements queue.Queue: ready tasks whose labels this worker offers
// are locked with FOR UPDATE SKIP LOCKED (workers claiming at once never wait
// on each other, and a worker never locks a task it may not run), each with
// the live workers that offer its labels, and queue.Choose claims the first
// the failover model lets this worker start. A task none of those may start
// makes its run visibly wait for a worker, and so does, when this worker
// found nothing to claim, a labelled task that no live worker offers the
// labels of (queue.Pick.Unserved).
func (s *Store) Claim(ctx context.Context, worker string, lease time.Duration) (*queue.Claim, error) {
	var out *queue.Claim
	err := s.txPipelined(ctx, func(tx pgx.Tx, ends *txEnds) error {
		var err error
		out, err = claim(ctx, tx, ends, worker, lease, nil, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return out, nil
}

var _ queue.AttemptStarter = (*Store)(nil)

// ClaimStarting implements queue.AttemptStarter: Claim, and the claimed
// task's next attempt started (queued, its token granted as StartAttempt
// grants it) in the same transaction.
func (s *Store) ClaimStarting(ctx context.Context, worker string, lease time.Duration, spec store.AttemptSpec) (*queue.Claim, error) {
	var out *queue.Claim
	err := s.granting(ctx, func(epoch int64) error {
		return s.txPipelined(ctx, func(tx pgx.Tx, ends *txEnds) error {
			var err error
			out, err = claim(ctx, tx, ends, worker, lease, &spec, epoch)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return out, nil
}

// claimPage is how many ready tasks a claim locks and reads at first:
// nearly always the first this worker may start is among them, and a claim
// that locks fewer rows passes fewer over of the workers claiming beside
// it (SKIP LOCKED), and reads and decodes less. The next pages (up to
// queue.ClaimCandidates in all) are read only when Choose took none of the
// first.
const claimPage = 4

// candidatesSQL reads a page of ready candidates (LIMIT $1) this worker
// ($2, live) offers the labels of, locked, each with the live workers able
// to run it (for a task without labels every live worker); after, when
// set, keeps to the candidates after the last of the previous page ($3,
// $4). The plan walks work_ready in the page's order and stops: the
// labels' test is wrapped in COALESCE because the planner, which cannot
// estimate a containment, would take it to keep one ready task in two
// hundred and then read and sort them all rather than walk the index.
func candidatesSQL(after bool) string {
	keyset := ""
	if after {
		keyset = ` AND (w.run COLLATE "C", w.task COLLATE "C") > ($3::text COLLATE "C", $4::text COLLATE "C")`
	}
	return `SELECT w.run, w.task, w.limits, w.failover, w.labels, w.pool, w.pool_slots,
	CASE WHEN cardinality(w.labels) = 0
		THEN ARRAY(SELECT name FROM workers WHERE state = 'live' AND expiry > pipec_now() ORDER BY name COLLATE "C")
		ELSE ARRAY(SELECT k.name FROM workers k WHERE k.state = 'live' AND k.expiry > pipec_now() AND k.labels @> w.labels
			ORDER BY k.name COLLATE "C") END
FROM work w WHERE w.state = 'ready'
	AND COALESCE(w.labels <@ (SELECT labels FROM workers WHERE name = $2 AND state = 'live' AND expiry > pipec_now()), false)` + keyset + `
ORDER BY w.run COLLATE "C", w.task COLLATE "C" LIMIT $1 FOR UPDATE OF w SKIP LOCKED`
}

// scanCandidates reads a page of candidatesSQL; their dependents are not
// read (queue.Decoder.Candidate).
func scanCandidates(rows pgx.Rows, err error) ([]queue.Work, error) {
	if err != nil {
		return nil, err
	}
	var dec queue.Decoder
	return collect(rows, func(r pgx.Row) (queue.Work, error) {
		var w queue.Work
		var limits, st string
		if err := r.Scan(&w.Run, &w.Task, &limits, &st, &w.Labels, &w.Pool, &w.PoolSlots, &w.Live); err != nil {
			return w, err
		}
		return w, dec.Candidate(&w, limits, st)
	})
}

// claim is Claim in tx (txPipelined); with start, the claimed task's next
// attempt is started too, with a token of epoch. The first page of
// candidates rides with the BEGIN; the claim's writes with the COMMIT.
func claim(ctx context.Context, tx pgx.Tx, ends *txEnds, worker string, lease time.Duration, start *store.AttemptSpec, epoch int64) (*queue.Claim, error) {
	cb := &pgx.Batch{}
	queueClaimReads(cb, worker)
	skip := ends.first(cb)
	cbr := tx.SendBatch(ctx, cb)
	for range skip {
		if _, err := cbr.Exec(); err != nil {
			cbr.Close()
			return nil, err
		}
	}
	page, err := readClaimReads(cbr)
	if cerr := cbr.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return claimFrom(ctx, tx, ends, worker, lease, start, epoch, page, stepWake{})
}

// queueClaimReads queues a claim's first read on b, the first page of
// candidates; readClaimReads reads it.
func queueClaimReads(b *pgx.Batch, worker string) {
	b.Queue(candidatesSQL(false), claimPage, worker)
}

func readClaimReads(br pgx.BatchResults) ([]queue.Work, error) {
	return scanCandidates(br.Query())
}

// claimFrom is claim once its first page of candidates is in; wake is
// what a visit's end before it in the transaction left it to decide
// (stepWake): idle workers are woken with the claim's commit unless it
// claims the only task the end made ready.
func claimFrom(ctx context.Context, tx pgx.Tx, ends *txEnds, worker string, lease time.Duration, start *store.AttemptSpec, epoch int64,
	page []queue.Work, wake stepWake) (*queue.Claim, error) {
	var err error
	cs := queue.NewCandidates()
	for {
		if err := poolsBusy(ctx, tx, page); err != nil {
			return nil, err
		}
		chosen, err := cs.Judge(page, worker)
		if err != nil {
			return nil, err
		}
		if chosen || len(page) < claimPage || len(cs.Work) >= queue.ClaimCandidates {
			break
		}
		lastRef := cs.Work[len(cs.Work)-1].Ref
		page, err = scanCandidates(tx.Query(ctx, candidatesSQL(true), min(queue.ClaimCandidates-len(cs.Work), 4*claimPage),
			worker, lastRef.Run, lastRef.Task))
		if err != nil {
			return nil, err
		}
	}
	cands, pick := cs.Work, &cs.Pick
	if pick.Chosen < 0 {
		// Read only now: a round trip more for a claim that finds nothing
		// (its worker then waits for work anyway), a statement less for
		// every other.
		unserved, err := scanUnserved(tx.Query(ctx, unservedSQL, worker, queue.ClaimCandidates))
		if err != nil {
			return nil, err
		}
		pick.Unserved(unserved)
		if wake.needed(nil) {
			if err := notifyWork(ctx, tx); err != nil {
				return nil, err
			}
		}
		return nil, setWaiting(ctx, tx, ends, pick.Waiting)
	}
	c := &cands[pick.Chosen]
	cl := &queue.Claim{Ref: c.Ref, Limits: c.Limits, Failover: c.Failover}
	// The claim, its event and (start) the attempt: one statement, with
	// the COMMIT unless a run's waiting message is to be set after; before
	// it, the wakeup the end before it left to the claim, when one is due.
	b := &pgx.Batch{}
	notify := wake.needed(c)
	if notify {
		b.Queue(notifyWorkSQL)
	}
	if start == nil {
		b.Queue(claimSQL, c.Run, c.Task, worker, queue.JSON(c.Failover), micros(lease),
			queue.EventWorkClaimed, queue.JSON(queue.ClaimedPayload(c, worker)), queue.WaitingPrefix(c.Task))
	} else {
		// And the attempt started as StartAttempt starts it, queued; the
		// resource is the run's pipeline@interval, as the runtime names it
		// (runtime.runner resource), and the claimed row keeps the run
		// running. The claim's writes go first (the attempt's insert reads
		// the claim's event in a one-time filter, before the grant it
		// joins: the interval's token row, which every attempt of the
		// interval waits for, is held no longer than before), and its
		// attempt.started event after them, its payload as appendEvent
		// would marshal it (sorted keys; the resource is pipeline@interval,
		// plain ASCII, which to_json quotes as encoding/json does). A grant
		// the epoch no longer covers fails the statement
		// (pipec_epoch_refused), the claim with it. Every row carries how
		// many attempts the task made in the run before (base); with no
		// row (the run not running, and no attempt of the task in its
		// interval), it made none.
		b.Queue(claimStartingSQL, c.Run, epoch, c.Task, worker, queue.JSON(c.Failover), micros(lease),
			queue.EventWorkClaimed, queue.JSON(queue.ClaimedPayload(c, worker)), start.Host, start.Boot,
			queue.WaitingPrefix(c.Task), queue.JSON(start.Worker), store.EventAttemptStarted, start.Worker)
	}
	commit := len(pick.Waiting) == 0
	if commit {
		ends.last(b)
	}
	br := tx.SendBatch(ctx, b)
	if notify {
		_, err = br.Exec()
	}
	switch {
	case err != nil:
	case start == nil:
		err = br.QueryRow().Scan(&cl.AttemptBase)
	default:
		// No fresh row: the run is not running, and the visit's
		// StartAttempt says so.
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			cl.Prior, err = collect(rows, func(r pgx.Row) (store.Attempt, error) {
				var fresh bool
				a, err := scanAttempt(trailedRow{r, []any{&fresh, &cl.AttemptBase}})
				if err == nil && fresh {
					cl.Attempt = &a
				}
				return a, err
			})
			cl.HasPrior = err == nil
		}
	}
	if err == nil && commit {
		err = ends.committed(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if epochRefused(err) {
		err = errNewEpoch
	}
	if err != nil {
		return nil, err
	}
	if !commit {
		if err := setWaiting(ctx, tx, nil, pick.Waiting); err != nil {
			return nil, err
		}
	}
	return cl, nil
}

// claimSQL is a claim (claimFrom) that starts no attempt: $1 run, $2 task,
// $3 worker, $4 failover, $5 lease (µs), $6 and $7 the claim's event kind
// and payload, $8 the task's waiting prefix. It returns how many attempts
// the task made in the run before.
var claimSQL = `WITH n AS (SELECT pipec_now() AS now), ` + claimWritesSQL(1, 2, 3, 4, 5, 6, 7, 8) + `
SELECT COALESCE(MAX(number), 0) FROM attempts a WHERE a.run = $1 AND a.task = $2`

// claimStartingSQL is a claim that starts its attempt (claimFrom), in one
// statement: $1 run, $2 epoch, $3 task, $4 worker, $5 failover, $6 lease
// (µs), $7 and $8 the claim's event kind and payload, $9 host, $10 boot, $11
// the task's waiting prefix, $12 the worker as JSON, $13 the attempt's event
// kind, $14 the attempt's worker.
var claimStartingSQL = `WITH n AS (SELECT pipec_now() AS now), ` + claimWritesSQL(1, 3, 4, 5, 6, 7, 8, 11) + `,
r AS (SELECT pipeline || '@' || interval_key AS resource FROM runs WHERE id = $1 AND state = 'running'),
` + grantFromRSQL + `,
b AS (SELECT COALESCE(MAX(number), 0) AS base FROM attempts WHERE run = $1 AND task = $3), a AS (
	INSERT INTO attempts (run, task, number, resource, token, state, started, lease_ms, lease_expiry, worker, pid, host, boot_id)
	SELECT $1, $3, b.base + 1, r.resource, g.last, 'queued', NULL, 0, NULL, $14, 0, $9, $10
	FROM g, n, r, b
	WHERE EXISTS (SELECT 1 FROM e) AND CASE WHEN g.valid THEN true ELSE pipec_epoch_refused() END
	RETURNING ` + attemptColumns + `
), ev AS (
	INSERT INTO events (run, time, kind, task, attempt, payload)
	SELECT a.run, ` + eventTime("n.now") + `, $13, a.task, a.number,
		'{"lease_ms":0,"pid":0,"resource":' || to_json(a.resource)::text || ',"state":"queued","token":' || a.token || ',"worker":' || $12 || '}'
	FROM a, n
)
SELECT ` + attemptColumns + `, true AS fresh, b.base FROM a, b
UNION ALL
SELECT ` + attemptColumns + `, false, b.base FROM attempts, b
WHERE resource = (SELECT pipeline || '@' || interval_key FROM runs WHERE id = $1) AND task = $3
ORDER BY token`

// claimWritesSQL is a claim's writes as CTEs c, s and e of one statement
// whose n is the clock's reading: the task claimed, its run waiting no more
// for it (a message about another task stays: that one still waits), and
// the claim's event, which e writes after reading c and s (so that they
// ran) and returns: a statement that reads e has the claim written first.
// Data-modifying CTEs always run. The arguments number the statement's
// parameters: run, task, worker, failover, lease (µs), the event's kind
// and payload, and the task's waiting prefix.
func claimWritesSQL(run, task, worker, failover, lease, kind, payload, prefix int) string {
	return fmt.Sprintf(`c AS (
	UPDATE work SET state = 'claimed', worker = $%[3]d, failover = $%[4]d, reason = '',
		claim_expiry = (SELECT now FROM n) + $%[5]d::bigint * interval '1 microsecond' WHERE run = $%[1]d AND task = $%[2]d RETURNING 1
), s AS (
	UPDATE submissions SET waiting = '' WHERE run = $%[1]d AND left(waiting, length($%[8]d)) = $%[8]d RETURNING 1
), e AS (
	INSERT INTO events (run, time, kind, task, attempt, payload)
	SELECT $%[1]d, `+eventTime("(SELECT now FROM n)")+`, $%[6]d, $%[2]d, 0, $%[7]d WHERE EXISTS (SELECT 1 FROM c) AND (SELECT count(*) FROM s) >= 0
	RETURNING 1
)`, run, task, worker, failover, lease, kind, payload, prefix)
}

// setWaiting sets the waiting message of the runs a claim found waiting
// (queue.Pick.Waiting), each only when it has none or one about the same
// task, logging each change; with ends, the COMMIT rides with the last.
func setWaiting(ctx context.Context, tx pgx.Tx, ends *txEnds, waiting []queue.Waiting) error {
	for _, w := range waiting {
		tag, err := tx.Exec(ctx, `UPDATE submissions SET waiting = $2
WHERE run = $1 AND waiting <> $2 AND (waiting = '' OR left(waiting, length($3)) = $3)`, w.Run, w.Message, queue.WaitingPrefix(w.Task))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			if err := appendEvent(ctx, tx, store.Event{Run: w.Run, Kind: queue.EventRunWaiting}, map[string]any{"waiting": w.Message}); err != nil {
				return err
			}
		}
	}
	if ends == nil {
		return nil
	}
	b := &pgx.Batch{}
	ends.last(b)
	br := tx.SendBatch(ctx, b)
	err := ends.committed(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// unservedSQL reads the ready labelled tasks that no live worker offers
// the labels of (for queue.Pick.Unserved: Live empty), for worker $1, LIMIT
// $2. Only a live worker looks, and it locks nothing: the rows stay free
// for the worker that joins with those labels.
const unservedSQL = `SELECT w.run, w.task, w.labels FROM work w
WHERE w.state = 'ready' AND cardinality(w.labels) > 0
	AND EXISTS (SELECT 1 FROM workers WHERE name = $1 AND state = 'live' AND expiry > pipec_now())
	AND NOT EXISTS (SELECT 1 FROM workers k WHERE k.state = 'live' AND k.expiry > pipec_now() AND k.labels @> w.labels)
ORDER BY w.run COLLATE "C", w.task COLLATE "C" LIMIT $2`

func scanUnserved(rows pgx.Rows, err error) ([]queue.Work, error) {
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r pgx.Row) (queue.Work, error) {
		var w queue.Work
		return w, r.Scan(&w.Run, &w.Task, &w.Labels)
	})
}

// Finish implements queue.Queue: queue.Finished decides, this writes it.
// The attempt's end (Result.End) and the visit's are one transaction: the
// claim and the submission are locked first, as in every decision about a
// run's tasks, then the attempt's row, in one round trip; the attempt's end,
// its events and the DAG's step go in another.
func (s *Store) Finish(ctx context.Context, worker string, ref queue.Ref, r queue.Result) error {
	return s.finish(ctx, worker, ref, r, nil)
}

var _ queue.FinishClaimer = (*Store)(nil)

// FinishClaiming implements queue.FinishClaimer: Finish, then the next
// claim (ClaimStarting's) in the same transaction. Where the finish's
// writes end the round trips of a finish that does not end the run (the
// usual case), the claim's first reads ride with them: a visit's end and
// the next claim cost three round trips and one commit, not four and two
// (for a succeeded visit, finishAssuming: two and one, the run's end
// riding with the COMMIT when the visit's end may end the run).
func (s *Store) FinishClaiming(ctx context.Context, worker string, ref queue.Ref, r queue.Result, lease time.Duration, spec store.AttemptSpec) (*queue.Claim, error) {
	next := &nextClaim{lease: lease, spec: spec}
	err := s.granting(ctx, func(epoch int64) error {
		next.epoch = epoch
		return s.finish(ctx, worker, ref, r, next)
	})
	if err != nil {
		return nil, err
	}
	if next.after {
		// The finish committed: a claim that fails now is no error of it
		// (the worker's next claim says what went wrong).
		cl, err := s.ClaimStarting(ctx, worker, lease, spec)
		if err != nil {
			return nil, nil
		}
		return cl, nil
	}
	return next.claim, nil
}

// nextClaim is the claim FinishClaiming makes in its finish's transaction;
// claim is what it claimed. after: the finish read before it wrote, and
// locked its run's submission (it may end the run), so the claim, which has
// read nothing yet, is made after its commit instead: the run's hot row
// stays locked no longer than the finish needs it. (finishAssuming has
// read the claim's candidates by then, and claims in its transaction.)
type nextClaim struct {
	lease time.Duration
	spec  store.AttemptSpec
	epoch int64
	claim *queue.Claim
	after bool
}

// finish is Finish, and FinishClaiming with next.
func (s *Store) finish(ctx context.Context, worker string, ref queue.Ref, r queue.Result, next *nextClaim) error {
	if e := r.End; e != nil && (e.Ref.Run != ref.Run || e.Ref.Task != ref.Task) {
		return fmt.Errorf("finish %s %s: the attempt %s is not of this task", ref.Run, ref.Task, e.Ref)
	}
	if done, err := s.finishAssuming(ctx, worker, ref, r, next); done {
		if err != nil {
			return fmt.Errorf("finish %s %s: %w", ref.Run, ref.Task, err)
		}
		return nil
	}
	lost := false
	err := s.txPipelined(ctx, func(tx pgx.Tx, ends *txEnds) error {
		lost = false
		if next != nil {
			next.claim, next.after = nil, false // a retried transaction decides afresh
		}
		// claimNext claims in tx once the finish is written (nothing for a
		// plain Finish: txPipelined commits).
		claimNext := func() error {
			if next == nil {
				return nil
			}
			var err error
			next.claim, err = claim(ctx, tx, ends, worker, next.lease, &next.spec, next.epoch)
			return err
		}
		// claimAfter leaves the claim to follow the commit of a finish that
		// locked the submission.
		claimAfter := func() error {
			if next != nil {
				next.after = true
			}
			return nil
		}
		w := queue.Work{Ref: ref, Worker: worker}
		var limits, st, deps string
		var openDeps int
		// The claim's row only: a success whose dependents are still to
		// run cannot end the run, so it need not wait behind the run's
		// other finishes (the submission's lock, taken below by every
		// change that may end the run: the run's hot row). Its dependents
		// are locked next (the DAG's step writes them anyway), so how many
		// are still to run cannot change before it: when some are, the
		// run goes on whatever this visit's end, and the COMMIT rides with
		// the writes.
		reads := &pgx.Batch{}
		reads.Queue(`SELECT w.limits, w.failover, w.dependents FROM work w
WHERE w.run = $1 AND w.task = $2 AND w.state = 'claimed' AND w.worker = $3 FOR UPDATE OF w`, ref.Run, ref.Task, worker)
		// Each dependent is locked by its primary key (a lateral probe
		// the planner cannot turn into a scan of the run), in the order of
		// the sorted dependents list, as every finish locks them.
		reads.Queue(`SELECT count(*) FILTER (WHERE d.state IN ('blocked', 'ready', 'claimed'))
FROM work m CROSS JOIN LATERAL jsonb_array_elements_text(m.dependents::jsonb) AS t(task)
	CROSS JOIN LATERAL (SELECT d.state FROM work d WHERE d.run = m.run AND d.task = t.task FOR UPDATE) d
WHERE m.run = $1 AND m.task = $2`, ref.Run, ref.Task)
		if r.End != nil {
			reads.Queue(`SELECT `+attemptColumns+` FROM attempts WHERE run = $1 AND task = $2 AND number = $3 FOR UPDATE`,
				r.End.Ref.Run, r.End.Ref.Task, r.End.Ref.Number)
		}
		skip := ends.first(reads) // the BEGIN rides with the locks
		br := tx.SendBatch(ctx, reads)
		for range skip {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return err
			}
		}
		err := br.QueryRow().Scan(&limits, &st, &deps)
		if err == nil || errors.Is(err, pgx.ErrNoRows) {
			if serr := br.QueryRow().Scan(&openDeps); serr != nil {
				br.Close()
				return serr
			}
		}
		var cur store.Attempt
		if r.End != nil && (err == nil || errors.Is(err, pgx.ErrNoRows)) {
			var aerr error
			cur, aerr = scanAttempt(br.QueryRow())
			if errors.Is(aerr, pgx.ErrNoRows) {
				aerr = fmt.Errorf("attempt %s: %w", r.End.Ref, store.ErrNotFound)
			}
			if aerr != nil {
				br.Close()
				return aerr
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		writes := &pgx.Batch{}
		if r.End != nil {
			if err := queueFinishAttempt(writes, cur, r.End.Outcome); err != nil {
				return err
			}
		}
		if u := r.Unused; u != nil && u.Run == ref.Run && u.Task == ref.Task && (r.End == nil || r.End.Ref != *u) {
			// The claim's attempt that never ran (ClaimStarting): it ends
			// failed, as an attempt that could not start does.
			writes.Queue(`WITH a AS (
	UPDATE attempts SET state = 'failed', class = $4, exit_code = -1, error_tail = $5, ended = pipec_now()
	WHERE run = $1 AND task = $2 AND number = $3 AND state = 'queued' RETURNING token
)
INSERT INTO events (run, time, kind, task, attempt, payload) SELECT $1, `+eventNowSQL+`, $6, $2, $3, $7 || a.token || ',"was":"queued"}' FROM a`,
				u.Run, u.Task, u.Number, queue.ClassNotStarted, queue.UnusedReason, store.EventAttemptFinished,
				`{"class":`+queue.JSON(queue.ClassNotStarted)+`,"error_tail":`+queue.JSON(queue.UnusedReason)+`,"exit_code":-1,"state":"failed","token":`)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			// Not this worker's visit any more, but its attempt did end.
			lost = true
			if writes.Len() == 0 {
				return nil
			}
			return sendLast(ctx, tx, ends, writes)
		}
		if err := queue.DecodeWork(&w, limits, st, deps); err != nil {
			return err
		}
		c, err := queue.Finished(&w, worker, r)
		if err != nil {
			return err
		}
		if c.Advance {
			last := openDeps > 0 // the run goes on: nothing of the finish follows the writes
			// With dependents left, the next claim follows in this
			// transaction (below) and decides the wakeup for them.
			wake := stepWake{run: ref.Run}
			queueStep(writes, ref, worker, c, last && next != nil)
			commit := last && next == nil
			if commit {
				ends.last(writes)
			}
			after := writes.Len() // what follows the step: the COMMIT, or the next claim's first reads
			if last && next != nil {
				queueClaimReads(writes, worker)
			}
			br := tx.SendBatch(ctx, writes)
			for range after - 1 - b2i(commit) {
				if _, err := br.Exec(); err != nil {
					br.Close()
					return err
				}
			}
			var open int
			var page []queue.Work
			err := wake.scan(br.QueryRow(), &open)
			switch {
			case err != nil:
			case commit:
				err = ends.committed(br)
			case last:
				page, err = readClaimReads(br)
			}
			if cerr := br.Close(); err == nil {
				err = cerr
			}
			if err != nil || commit {
				return err
			}
			if last {
				next.claim, err = claimFrom(ctx, tx, ends, worker, next.lease, &next.spec, next.epoch, page, wake)
				return err
			}
			if open > 0 {
				return claimNext() // its dependents are still to run: the run goes on
			}
			// No dependents, or all of them not run already (another of
			// their needs failed): this may be the run's last task.
			return endingRun(ctx, tx, ref.Run, next)
		}
		if writes.Len() > 0 {
			if err := tx.SendBatch(ctx, writes).Close(); err != nil {
				return err
			}
		}
		if err := lockSubmission(ctx, tx, ref.Run); err != nil {
			return err
		}
		if err := applyChange(ctx, tx, &w, c); err != nil {
			return err
		}
		if err := notifyWork(ctx, tx); err != nil {
			return err
		}
		if err := maybeFinishRun(ctx, tx, ref.Run); err != nil {
			return err
		}
		return claimAfter()
	})
	if err == nil && lost {
		err = fmt.Errorf("%s %s is no longer %s's (its lease expired and the task was taken over): %w", ref.Run, ref.Task, worker, store.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("finish %s %s: %w", ref.Run, ref.Task, err)
	}
	return nil
}

// finishAssuming is finish for a succeeded visit whose attempt's end comes
// with the attempt as the visit left it (store.Outcome.Was): the end,
// the DAG's step and (next) the claim's first reads go in one round trip
// with the BEGIN, without reading first what the writes change: each write
// is guarded on what the visit knows (its claim still its own, its attempt
// still as its writes left it), and a guard that misses fails the
// transaction (pipec_finish_missed). done is false when the visit's end is
// not of that kind or a guard missed: nothing was written, and finish
// decides after reading. Its events are finish's, in the same order.
//
// It locks the claim's row first, as every change to a claimed task does
// (a sweep, a heartbeat, finish), so that whichever comes second waits
// there before taking anything else; then the attempt's row and the
// dependents' (finish takes those two the other way round, but never
// while this one holds the claim's row); then, when the end may end the
// run, the submission's row last, after the next claim's writes, in the
// batch of the COMMIT (txEnds.runEnd).
func (s *Store) finishAssuming(ctx context.Context, worker string, ref queue.Ref, r queue.Result, next *nextClaim) (done bool, err error) {
	e := r.End
	if r.Ending != queue.Succeeded || e == nil || e.Outcome.Was == nil || e.Outcome.Was.AttemptRef != e.Ref || r.Unused != nil {
		return false, nil
	}
	c := queue.Success(worker)
	err = s.txPipelined(ctx, func(tx pgx.Tx, ends *txEnds) error {
		if next != nil {
			next.claim, next.after = nil, false // a retried transaction decides afresh
		}
		b := &pgx.Batch{}
		end, err := endOf(*e.Outcome.Was, e.Outcome)
		if err != nil || end == nil {
			// The end is not one Was can take, or Was holds it already (a
			// retry): finish judges it after reading.
			return errFinishMissed
		}
		queueFinishStep(b, end, *e.Outcome.Was, worker, c, next != nil)
		if next != nil {
			queueClaimReads(b, worker)
		}
		skip := ends.first(b)
		br := tx.SendBatch(ctx, b)
		for range skip {
			if _, err = br.Exec(); err != nil {
				break
			}
		}
		var open int
		var page []queue.Work
		wake := stepWake{run: ref.Run}
		if err == nil {
			err = wake.scan(br.QueryRow(), &open)
		}
		if err == nil && next != nil {
			page, err = readClaimReads(br)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if finishMissed(err) {
			err = errFinishMissed
		}
		if err != nil {
			return err
		}
		if open > 0 {
			// Its dependents are still to run: the run goes on.
			if next == nil {
				return nil
			}
			next.claim, err = claimFrom(ctx, tx, ends, worker, next.lease, &next.spec, next.epoch, page, wake)
			return err
		}
		// No dependents, or none left to run: this may be the run's last
		// task, decided under the submission's lock, which every finish
		// that may end the run takes. The lock and the decision ride with
		// the COMMIT (txEnds.runEnd), after the next claim's writes, made
		// in this transaction from the candidates read and locked with the
		// end (a claim after the commit would read them again in a
		// transaction of its own): the run's hot row is held for the
		// server's execution of that last batch, no round trip and no
		// choice of the worker's longer.
		ends.runEnd = ref.Run
		if next == nil {
			return nil // the COMMIT follows, with the run's end
		}
		next.claim, err = claimFrom(ctx, tx, ends, worker, next.lease, &next.spec, next.epoch, page, wake)
		return err
	})
	if errors.Is(err, errFinishMissed) {
		return false, nil
	}
	return true, err
}

// endingRun ends a finish that may end its run: under the submission's
// lock, the run is finished when no task is left; the next claim (next,
// when given) follows the commit, so the run's hot row stays locked no
// longer than that (see nextClaim).
func endingRun(ctx context.Context, tx pgx.Tx, run string, next *nextClaim) error {
	if next != nil {
		next.after = true
	}
	return lockAndFinishRun(ctx, tx, run)
}

// queueStep queues the DAG's step of a succeeded visit (c, an Advance) on
// b: the task's state and event, its dependents one need fewer (ready at
// none), and a wakeup for idle workers when some became ready (unless
// deferReady: the claim that follows in the transaction decides, stepWake)
// or a pool slot freed, in one statement; only while the claim is worker's,
// else the statement fails (pipec_finish_missed). Its row: the guard, the
// wakeup, how many dependents are still to run, how many became ready, and
// the dependents.
func queueStep(b *pgx.Batch, ref queue.Ref, worker string, c queue.Change, deferReady bool) {
	b.Queue(stepSQL, ref.Run, ref.Task, worker, c.State, c.Notes[0].Kind, queue.JSON(c.Notes[0].Payload), deferReady)
}

// stepSQL is queueStep's statement, built once: $1 run, $2 task, $3
// worker, $4 the task's state, $5 and $6 its event's kind and payload, $7
// deferReady.
var stepSQL = `WITH ` + stepEndSQL(4, 3) + `, ev AS (
	INSERT INTO events (run, time, kind, task, attempt, payload) SELECT $1, ` + eventNowSQL + `, $5, $2, 0, $6 FROM me
), deps AS (` + stepDepsSQL + `)
` + stepRowSQL("me", 7)

// stepEndSQL, stepDepsSQL and stepRowSQL are the DAG's step as queueStep
// and queueFinishStep write it, $1 the run and $2 the task. stepEndSQL is
// CTE me, the claimed task ended (state: parameter $state) while worker's
// (parameter $worker), returning its dependents and pool.
func stepEndSQL(state, worker int) string {
	return fmt.Sprintf(`me AS (
	UPDATE work SET state = $%d, reason = '', claim_expiry = NULL
	WHERE run = $1 AND task = $2 AND state = 'claimed' AND worker = $%d RETURNING dependents, pool
)`, state, worker)
}

// stepDepsSQL steps me's dependents (a CTE's body, to which a condition
// may be added), each one need fewer, ready at none, returning their
// states.
const stepDepsSQL = `SELECT pipec_step_dependents($1, ARRAY(SELECT jsonb_array_elements_text(me.dependents::jsonb))) AS state FROM me`

// stepRowSQL is the step's row, read from deps: the guard (the statement
// fails, pipec_finish_missed, when CTE written wrote no row), the wakeup
// for idle workers when a dependent became ready or a pool slot freed, and
// how many dependents are still to run.
func stepRowSQL(written string, deferReady int) string {
	return fmt.Sprintf(`SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM `+written+`) THEN pipec_finish_missed() END,
	CASE WHEN (count(*) FILTER (WHERE state = 'ready') > 0 AND NOT $%d::boolean) OR (SELECT pool FROM me) <> ''
		THEN pg_notify('`+workChannel+`', '') END,
	count(*) FILTER (WHERE state IN ('blocked', 'ready', 'claimed')),
	count(*) FILTER (WHERE state = 'ready'), COALESCE((SELECT dependents FROM me), '[]') FROM deps`, deferReady)
}

// stepWake is what a visit's end read from its step (stepRowSQL) when it
// left the wakeup of idle workers for the dependents it made ready to the
// claim that follows in its transaction: how many it made ready, and its
// dependents (JSON) in run. A wakeup that only sends idle workers after the
// one task this worker claims costs each of them a claim that finds
// nothing: in a narrow DAG, most of the claims made.
type stepWake struct {
	run   string
	ready int
	deps  string
}

// scan reads the step's row into w (run is the caller's), and how many of
// the dependents are still to run.
func (w *stepWake) scan(row pgx.Row, open *int) error {
	return row.Scan(nil, nil, open, &w.ready, &w.deps)
}

// needed says whether idle workers must be woken when claimed (nil for
// nothing) is what the transaction claims: unless it claims the only
// dependent the step made ready, one is left for them.
func (w stepWake) needed(claimed *queue.Work) bool {
	if w.ready == 0 {
		return false
	}
	if w.ready > 1 || claimed == nil || claimed.Run != w.run {
		return true
	}
	var deps []string
	if err := json.Unmarshal([]byte(w.deps), &deps); err != nil {
		return true
	}
	return !slices.Contains(deps, claimed.Task) // a ready dependent was made ready by this step
}

// queueFinishStep queues finishAssuming's one statement on b: a succeeded
// visit's end, that is end, the end of its attempt as the visit left it
// (was, unread), and the DAG's step (c, an Advance) as queueStep writes
// it. The claim's row is written first (the update's lock is the one every
// change to a claimed task takes first), then the attempt's, each only as
// the visit left it (the claim worker's, the attempt in was's state with
// was's token), then the dependents; the attempt's events and the task's
// go in that order. A guess that misses fails the statement
// (pipec_finish_missed), so that nothing of the transaction commits. Its
// row is queueStep's.
func queueFinishStep(b *pgx.Batch, end *attemptEnd, was store.Attempt, worker string, c queue.Change, deferReady bool) {
	n := len(end.args)
	args := append(end.args[:n:n], string(was.State), was.Token, worker, c.State, deferReady)
	args[7] = append(end.kinds[:len(end.kinds):len(end.kinds)], c.Notes[0].Kind)
	args[8] = append(end.payloads[:len(end.payloads):len(end.payloads)], queue.JSON(c.Notes[0].Payload))
	b.Queue(`WITH `+stepEndSQL(n+4, n+3)+`, n AS (SELECT pipec_now() AS now), u AS (
	`+end.update+fmt.Sprintf(` AND state = $%d AND token = $%d`, n+1, n+2)+` AND EXISTS (SELECT 1 FROM me) RETURNING 1
), ev AS (
	INSERT INTO events (run, time, kind, task, attempt, payload)
	SELECT $1, `+eventTime("n.now")+`, e.kind, $2, CASE WHEN e.i < cardinality($8::text[]) THEN $3 ELSE 0 END, e.payload
	FROM n, unnest($8::text[], $9::text[]) WITH ORDINALITY AS e(kind, payload, i) WHERE EXISTS (SELECT 1 FROM u) ORDER BY e.i
), deps AS (`+stepDepsSQL+` WHERE EXISTS (SELECT 1 FROM u))
`+stepRowSQL("u", n+5), args...)
}

// errFinishMissed: finishAssuming's guesses did not hold; nothing was
// written.
var errFinishMissed = errors.New("the visit's end found its rows changed")

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// applyChange writes a change that does not advance the DAG: the task's
// row, its events, and the spread of its failure.
func applyChange(ctx context.Context, tx pgx.Tx, w *queue.Work, c queue.Change) error {
	if _, err := tx.Exec(ctx, `UPDATE work SET state = $3::text, failover = $4, reason = $5, worker = CASE WHEN $3::text = 'ready' THEN '' ELSE worker END,
	claim_expiry = NULL WHERE run = $1 AND task = $2`, w.Run, w.Task, c.State, queue.JSON(w.Failover), c.Reason); err != nil {
		return err
	}
	for _, n := range c.Notes {
		if err := appendEvent(ctx, tx, store.Event{Run: w.Run, Kind: n.Kind, Task: w.Task}, n.Payload); err != nil {
			return err
		}
	}
	if c.Spread == "" {
		return nil
	}
	return queue.Spread(w.Task, w.Dependents, c.Spread, func(task, why string) ([]string, bool, error) {
		var deps string
		err := tx.QueryRow(ctx, `UPDATE work SET state = 'not_run', reason = $3 WHERE run = $1 AND task = $2 AND state = 'blocked'
RETURNING dependents`, w.Run, task, why).Scan(&deps)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		if err := appendEvent(ctx, tx, store.Event{Run: w.Run, Kind: queue.EventWorkNotRun, Task: task}, queue.NotRunPayload(why)); err != nil {
			return nil, false, err
		}
		var next []string
		return next, true, json.Unmarshal([]byte(deps), &next)
	})
}

// runOpenSQL is whether any task of a run ($1) is left to do: a probe
// each of work_blocked, work_claimed and work_ready, whose run is compared
// in that index's collation, "C" (equality is the same in every
// deterministic collation, and only so is the index used).
const runOpenSQL = `SELECT EXISTS (SELECT 1 FROM work WHERE run = $1 AND state = 'blocked')
	OR EXISTS (SELECT 1 FROM work WHERE run = $1 AND state = 'claimed')
	OR EXISTS (SELECT 1 FROM work WHERE run COLLATE "C" = $1 AND state = 'ready') AS open`

// runEndSQL finishes run $1, if it is still running and none of its tasks
// is left to do (runOpenSQL), in one statement: $2 its state when none of
// its tasks failed or was not run, $3 when some did (queue.RunEnd's two
// ends, runEndArgs), its waiting message cleared, its lease dropped, and
// its event logged (kind $4, the state as payload). The caller holds the
// submission's lock, taken by a statement before this one: this one's
// snapshot, taken once the lock is held, sees every finish that held it
// before.
var runEndSQL = `WITH l AS MATERIALIZED (` + runOpenSQL + `), r AS (
	UPDATE runs SET finished = pipec_now(),
		state = CASE WHEN EXISTS (SELECT 1 FROM work WHERE run = $1 AND state IN ('failed', 'not_run')) THEN $3 ELSE $2 END
	WHERE id = $1 AND state = 'running' AND NOT (SELECT open FROM l) RETURNING id, state
), s AS (
	UPDATE submissions SET waiting = '' WHERE run IN (SELECT id FROM r)
), ls AS (
	DELETE FROM run_leases WHERE run IN (SELECT id FROM r)
)
INSERT INTO events (run, time, kind, task, attempt, payload)
SELECT r.id, ` + eventNowSQL + `, $4, '', 0, '{"state":' || to_json(r.state::text)::text || '}' FROM r`

// runEndArgs are runEndSQL's arguments for run: the ends queue.RunEnd
// gives a run with no task left, without and with a failed one.
func runEndArgs(run string) []any {
	ok, _ := queue.RunEnd(0, 0)
	failed, _ := queue.RunEnd(0, 1)
	return []any{run, string(ok), string(failed), store.EventRunFinished}
}

// maybeFinishRun finishes the run when none of its tasks is left to do
// (runEndSQL). Called under lockSubmission.
func maybeFinishRun(ctx context.Context, tx pgx.Tx, run string) error {
	_, err := tx.Exec(ctx, runEndSQL, runEndArgs(run)...)
	return err
}

// lockAndFinishRun is lockSubmission then maybeFinishRun, in one round
// trip: each statement of a batch has its own snapshot, so the run's end,
// decided once the lock is held, sees every finish that held it before.
func lockAndFinishRun(ctx context.Context, tx pgx.Tx, run string) error {
	b := &pgx.Batch{}
	queueRunEnd(b, run)
	br := tx.SendBatch(ctx, b)
	err := readRunEnd(br, run)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// runEndStatements is how many statements queueRunEnd queues.
const runEndStatements = 2

// queueRunEnd queues the submission's lock and the run's end
// (lockAndFinishRun's statements) on b; readRunEnd reads them.
func queueRunEnd(b *pgx.Batch, run string) {
	b.Queue(lockSubmissionSQL, run)
	b.Queue(runEndSQL, runEndArgs(run)...)
}

func readRunEnd(br pgx.BatchResults, run string) error {
	if err := scanSubmissionLock(br.QueryRow(), run); err != nil {
		return err
	}
	_, err := br.Exec()
	return err
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
	b := &pgx.Batch{}
	b.Queue(`SELECT `+runColumns+` FROM runs WHERE id = $1`, run)
	b.Queue(`SELECT waiting FROM submissions WHERE run = $1`, run)
	if memo != nil {
		memo.Read(run)
		since := int64(-1)
		if m, err := strconv.ParseInt(memo.Mark(), 10, 64); err == nil {
			since = m
		}
		memo.Marked("")
		b.Queue(followSQL, run, since)
	} else {
		b.Queue(statusSQL, run)
	}
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	r, err := scanRun(br.QueryRow())
	if errors.Is(err, pgx.ErrNoRows) {
		return rs, fmt.Errorf("run %q: %w", run, store.ErrNotFound)
	}
	if err != nil {
		return rs, err
	}
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
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `LISTEN `+channel); err != nil {
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
