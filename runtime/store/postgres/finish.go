package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

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

// synchronous says whether a visit's end commits synchronously: its
// attempt's end asks to be kept through a crash (store.Outcome.Synchronous).
func synchronous(r queue.Result) bool { return r.End != nil && r.End.Outcome.Synchronous() }

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
	err := s.pipelined(ctx, synchronous(r), func(tx pgx.Tx, ends *txEnds) error {
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
		br, err := sendSkipping(ctx, tx, ends, reads, 0) // the BEGIN rides with the locks
		if err != nil {
			br.Close()
			return err
		}
		err = br.QueryRow().Scan(&limits, &st, &deps)
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
		if errors.Is(err, pgx.ErrNoRows) && r.End != nil && r.End.Outcome.Another(cur, worker) {
			lost = true
			return nil // the visit's attempt is another now: nothing of it to record
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
	err = s.pipelined(ctx, synchronous(r), func(tx pgx.Tx, ends *txEnds) error {
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
		br, err := sendSkipping(ctx, tx, ends, b, 0)
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
	b.Queue(stepSQL, ref.Run, ref.Task, worker, c.State, c.Notes[0].Kind, queue.JSON(c.Notes[0].Payload), deferReady, c.Reason)
}

// stepSQL is queueStep's statement, built once: $1 run, $2 task, $3
// worker, $4 the task's state, $5 and $6 its event's kind and payload, $7
// deferReady, $8 the task's reason.
var stepSQL = `WITH ` + stepEndSQL(4, 3, 8) + `, ev AS (
	INSERT INTO events (run, time, kind, task, attempt, payload) SELECT $1, ` + eventNowSQL + `, $5, $2, 0, $6 FROM me
), deps AS (` + stepDepsSQL + `)
` + stepRowSQL("me", 7)

// stepEndSQL, stepDepsSQL and stepRowSQL are the DAG's step as queueStep
// and queueFinishStep write it, $1 the run and $2 the task. stepEndSQL is
// CTE me, the claimed task ended (state: parameter $state) while worker's
// (parameter $worker), its reason parameter $reason (empty when 0), returning
// its dependents and pool.
func stepEndSQL(state, worker, reason int) string {
	why := "''"
	if reason > 0 {
		why = fmt.Sprintf("$%d", reason)
	}
	return fmt.Sprintf(`me AS (
	UPDATE work SET state = $%d, reason = %s, claim_expiry = NULL
	WHERE run = $1 AND task = $2 AND state = 'claimed' AND worker = $%d RETURNING dependents, pool
)`, state, why, worker)
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
	b.Queue(`WITH `+stepEndSQL(n+4, n+3, 0)+`, n AS (SELECT pipec_now() AS now), u AS (
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
