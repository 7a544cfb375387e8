package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

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
		return nil, err
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
		return nil, err
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
	cbr, err := sendSkipping(ctx, tx, ends, cb, 0)
	if err != nil {
		cbr.Close()
		return nil, err
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
