package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migration is one step of the schema. Steps are applied in order, each in
// the transaction that records its version, and never edited once released:
// a change is a new step appended to migrations.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations is the schema's history. Times are timestamptz on the server's
// clock (pipec_now()), NULL meaning unset.
var migrations = []migration{
	{1, "initial schema", `
-- The one clock of the store: the server's, unless a test set pipec.now for
-- its transaction.
CREATE FUNCTION pipec_now() RETURNS timestamptz LANGUAGE sql VOLATILE AS $$
	SELECT COALESCE(NULLIF(current_setting('pipec.now', true), '')::timestamptz, clock_timestamp())
$$;

-- A random identity made once, when the database is created: a sink records
-- which state publishes to it by this id.
CREATE TABLE state_identity (
	id       integer PRIMARY KEY CHECK (id = 1),
	state_id text NOT NULL
);
INSERT INTO state_identity (id, state_id) VALUES (1, replace(gen_random_uuid()::text, '-', ''));

CREATE TABLE runs (
	id             text PRIMARY KEY,
	pipeline       text NOT NULL,
	interval_key   text NOT NULL,
	seq            integer NOT NULL,
	interval_start timestamptz,
	interval_end   timestamptz,
	code_version   text NOT NULL,
	plan_digest    text NOT NULL,
	state          text NOT NULL CHECK (state IN ('running', 'succeeded', 'failed')),
	created        timestamptz NOT NULL,
	finished       timestamptz,
	UNIQUE (pipeline, interval_key, seq)
);

CREATE TABLE run_seqs (
	pipeline     text NOT NULL,
	interval_key text NOT NULL,
	last         integer NOT NULL,
	PRIMARY KEY (pipeline, interval_key)
);

CREATE TABLE tokens (
	resource text PRIMARY KEY,
	last     bigint NOT NULL CHECK (last > 0)
);

CREATE TABLE attempts (
	run          text NOT NULL REFERENCES runs(id),
	task         text NOT NULL,
	number       integer NOT NULL CHECK (number > 0),
	resource     text NOT NULL,
	token        bigint NOT NULL,
	state        text NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'unknown')),
	class        text NOT NULL DEFAULT '',
	exit_code    integer NOT NULL DEFAULT 0,
	error_tail   text NOT NULL DEFAULT '',
	started      timestamptz,
	ended        timestamptz,
	lease_ms     bigint NOT NULL DEFAULT 0,
	lease_expiry timestamptz,
	worker       text NOT NULL DEFAULT '',
	pid          integer NOT NULL DEFAULT 0,
	PRIMARY KEY (run, task, number),
	UNIQUE (resource, token)
);
CREATE INDEX attempts_lease ON attempts (lease_expiry) WHERE state = 'running';
-- Fence at grant looks up the highest token of a task in a resource.
CREATE INDEX attempts_task_token ON attempts (resource, task, token);

-- One run per (pipeline, interval) at a time: the holder renews its lease;
-- an expired lease may be taken over.
CREATE TABLE run_leases (
	pipeline     text NOT NULL,
	interval_key text NOT NULL,
	run          text NOT NULL REFERENCES runs(id),
	host         text NOT NULL,
	pid          integer NOT NULL,
	since        timestamptz NOT NULL,
	expiry       timestamptz NOT NULL,
	PRIMARY KEY (pipeline, interval_key)
);

CREATE TABLE versions (
	id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	pipeline     text NOT NULL,
	artifact     text NOT NULL,
	interval_key text NOT NULL,
	digest       text NOT NULL,
	run          text NOT NULL,
	task         text NOT NULL,
	attempt      integer NOT NULL,
	token        bigint NOT NULL,
	code_version text NOT NULL,
	staging_path text NOT NULL,
	state        text NOT NULL CHECK (state IN ('staged', 'accepted', 'rejected')),
	reason       text NOT NULL DEFAULT '',
	created      timestamptz NOT NULL,
	FOREIGN KEY (run, task, attempt) REFERENCES attempts (run, task, number),
	UNIQUE (artifact, interval_key, digest, run, task, attempt)
);
CREATE INDEX versions_accepted ON versions (pipeline, artifact, interval_key, token) WHERE state = 'accepted';

-- Pointers are scoped by pipeline: two pipelines sharing one state with the
-- same sink and artifact names never see each other's data.
CREATE TABLE pointers (
	pipeline     text NOT NULL,
	sink         text NOT NULL,
	artifact     text NOT NULL,
	interval_key text NOT NULL,
	version      bigint NOT NULL REFERENCES versions(id),
	token        bigint NOT NULL,
	unfenced     boolean NOT NULL DEFAULT false,
	updated      timestamptz NOT NULL,
	PRIMARY KEY (pipeline, sink, artifact, interval_key)
);

CREATE TABLE events (
	seq     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	run     text NOT NULL,
	time    timestamptz NOT NULL,
	kind    text NOT NULL,
	task    text NOT NULL DEFAULT '',
	attempt integer NOT NULL DEFAULT 0,
	payload text NOT NULL DEFAULT ''
);
CREATE INDEX events_run ON events (run, seq);

-- The event log is append-only: the database itself refuses edits.
CREATE FUNCTION pipec_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'events are append-only';
END
$$;
CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
	FOR EACH ROW EXECUTE FUNCTION pipec_events_append_only();
`},
	{2, "workers and their work", `
-- Workers register and heartbeat; a worker is live while its expiry (the
-- server's clock) is ahead.
CREATE TABLE workers (
	name      text PRIMARY KEY,
	host      text NOT NULL,
	pid       integer NOT NULL,
	slots     integer NOT NULL,
	labels    text NOT NULL DEFAULT '',
	state     text NOT NULL CHECK (state IN ('live', 'stopping', 'stopped')),
	started   timestamptz NOT NULL,
	last_seen timestamptz NOT NULL,
	expiry    timestamptz NOT NULL
);

-- A run handed to the workers: its plan, where its spec lives, and what it
-- waits for when no worker can take a task.
CREATE TABLE submissions (
	run       text PRIMARY KEY REFERENCES runs(id),
	plan      text NOT NULL,
	base_dir  text NOT NULL,
	interval_value text NOT NULL,
	waiting   text NOT NULL DEFAULT ''
);

-- One row per task of a submitted run: the DAG's state, advanced in the
-- transactions that finish a task's visit, and the task's failover story
-- (internal/failover.State as JSON).
CREATE TABLE work (
	run          text NOT NULL REFERENCES runs(id),
	task         text NOT NULL,
	state        text NOT NULL CHECK (state IN ('blocked', 'ready', 'claimed', 'succeeded', 'failed', 'not_run')),
	waiting_on   integer NOT NULL,
	dependents   text NOT NULL,
	limits       text NOT NULL,
	failover     text NOT NULL DEFAULT '{}',
	worker       text NOT NULL DEFAULT '',
	claim_expiry timestamptz,
	reason       text NOT NULL DEFAULT '',
	PRIMARY KEY (run, task)
);
CREATE INDEX work_open ON work (state, run) WHERE state IN ('ready', 'claimed');
`},
	{3, "token epochs", `
-- A token is epoch * 1e9 + n. A store handle records a new epoch, durably,
-- before its first grant; its grants then commit asynchronously.
CREATE TABLE epochs (
	id    integer PRIMARY KEY CHECK (id = 1),
	epoch bigint NOT NULL
);
INSERT INTO epochs (id, epoch) VALUES (1, 0);
-- The epochs in force since the server last recovered from a crash: an
-- unlogged table is emptied by crash recovery, the one event that can take
-- back asynchronous grants, so a handle whose epoch is missing here records
-- a new one before granting again.
CREATE UNLOGGED TABLE epochs_alive (
	epoch bigint PRIMARY KEY
);
`},
	{4, "attempt processes", `
-- Who ran an attempt, so that a rerun after a kill -9 of pipec can find its
-- orphaned processes on that machine: the pid with its start time (clock
-- ticks after boot), the boot id and the host (see store.Process).
ALTER TABLE attempts ADD COLUMN host       text   NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN boot_id    text   NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN pgid       integer NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN proc_start bigint NOT NULL DEFAULT 0;
`},
	{5, "worker labels", `
-- The labels a task requires and those a worker offers, sorted, as arrays:
-- a worker claims a task only when the task's are contained in its own
-- (work.labels <@ workers.labels), and the failover model reasons over the
-- live workers that offer them (workers.labels @> work.labels).
ALTER TABLE workers ALTER COLUMN labels DROP DEFAULT;
ALTER TABLE workers ALTER COLUMN labels TYPE text[]
	USING COALESCE(string_to_array(NULLIF(labels, ''), ','), '{}');
ALTER TABLE workers ALTER COLUMN labels SET DEFAULT '{}';
ALTER TABLE work ADD COLUMN labels text[] NOT NULL DEFAULT '{}';
-- Idle workers look for labelled tasks no live worker can take, to say
-- what the run waits for.
CREATE INDEX work_labelled ON work (run, task) WHERE state = 'ready' AND cardinality(labels) > 0;
`},
	{6, "version locations", `
-- A version's files are in the pipeline's artifact store (runtime/artifacts),
-- named by a location key "<pipeline>/<artifact>/<hex digest>", not by a path
-- on the disk of the machine that produced them.
ALTER TABLE versions RENAME COLUMN staging_path TO location;
-- Versions frozen before were at <state folder>/versions/<key>, where the
-- default artifact store of a local run is: they become keys in it. Any
-- other path stays as it was and is read as a path on this machine.
UPDATE versions SET location = pipeline || '/' || artifact || '/' || substr(digest, 8)
WHERE pipeline <> '' AND digest LIKE 'sha256:%'
AND right(location, length('/versions/' || pipeline || '/' || artifact || '/' || substr(digest, 8)))
	= '/versions/' || pipeline || '/' || artifact || '/' || substr(digest, 8);
`},
	{7, "work pools", `
-- A task's pool, "<pipeline>/<pool>" (queue.PoolKey), and its slots: a claim
-- counts the pool's claimed tasks across runs and workers.
ALTER TABLE work ADD COLUMN pool text NOT NULL DEFAULT '';
ALTER TABLE work ADD COLUMN pool_slots integer NOT NULL DEFAULT 0;
CREATE INDEX work_pool_claimed ON work (pool) WHERE state = 'claimed' AND pool <> '';
`},
	{8, "cancelled runs", `
-- A cancelled run (pipec cancel) is failed, with why and by whom here: a
-- pipec that does not know cancellation sees a failed run.
ALTER TABLE runs ADD COLUMN cancelled text NOT NULL DEFAULT '';
`},
	{9, "event times never go back", `
-- An event's time is never before the time of the event logged before it
-- (a server clock stepped back by NTP): appends of one transaction after
-- another are ordered; appends of concurrent transactions are ordered by
-- their sequence numbers, as they always were.
CREATE FUNCTION pipec_event_time() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.time := GREATEST(NEW.time, COALESCE((SELECT time FROM events ORDER BY seq DESC LIMIT 1), NEW.time));
	RETURN NEW;
END
$$;
CREATE TRIGGER events_time BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION pipec_event_time();
`},
	{10, "hot queue paths", `
-- A worker's heartbeat renews its claims: found by worker, not by reading
-- every task.
CREATE INDEX work_claimed_by ON work (worker) WHERE state = 'claimed';
-- Whether a run has a task left to do, asked by each finish that may end
-- it, is one index probe.
CREATE INDEX work_unfinished ON work (run) WHERE state IN ('blocked', 'ready', 'claimed');

-- A token grant its epoch no longer covers fails the statement that made it
-- (SQLSTATE PE001), so a transaction whose COMMIT was sent with it (a
-- worker's claim) never commits it.
CREATE FUNCTION pipec_epoch_refused() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	RAISE EXCEPTION 'token epoch must be renewed' USING ERRCODE = 'PE001';
END
$$;
`},
	{11, "pool slots held outside the claims", `
-- A pool slot held by a visit another engine dispatches (queue.PoolSlots),
-- one per task of a run, under a lease on the server's clock (as the
-- claims'): a claim counts the live ones beside its claimed work rows.
CREATE TABLE pool_holds (
	pool   text NOT NULL,
	run    text NOT NULL,
	task   text NOT NULL,
	worker text NOT NULL,
	since  timestamptz NOT NULL,
	expiry timestamptz NOT NULL,
	PRIMARY KEY (pool, run, task)
);
`},
	{12, "a finish touches its dependents only", `
-- A finished task's dependents each wait on one task fewer (ready at none):
-- one primary-key update per dependent. Written as "task = ANY(...)" the
-- planner, whose estimate of a run's rows is a guess on a table the run has
-- just filled, may read every row of the run for each finish (a 1,000-task
-- run: 1,000 rows per finish); a probe per dependent has no other plan.
CREATE FUNCTION pipec_step_dependents(p_run text, p_tasks text[]) RETURNS SETOF text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	t text;
BEGIN
	FOREACH t IN ARRAY p_tasks LOOP
		RETURN QUERY UPDATE work SET waiting_on = waiting_on - 1,
			state = CASE WHEN waiting_on = 1 AND state = 'blocked' THEN 'ready' ELSE state END
		WHERE run = p_run AND task = t RETURNING work.state;
	END LOOP;
END
$$;
`},
	{13, "a visit's end written as its worker left it", `
-- A worker's finish may write a visit's end assuming the rows are as its own
-- writes left them, each write guarded on what it assumed; a guard that
-- misses fails the statement (SQLSTATE PE002), so a transaction whose COMMIT
-- was sent with it never commits, and the worker decides again after
-- reading.
CREATE FUNCTION pipec_finish_missed() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	RAISE EXCEPTION 'a visit''s end found its rows changed' USING ERRCODE = 'PE002';
END
$$;
`},
	{14, "run ends notify", `
-- A run that ends, however it ends (its last task, a cancel, a takeover),
-- notifies pipec_run_end with its id when the transaction commits, so a
-- follower (pipec submit --wait) sees the end at once, not at its next look.
CREATE FUNCTION pipec_run_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('pipec_run_end', NEW.id);
	RETURN NULL;
END
$$;
CREATE TRIGGER runs_ended AFTER UPDATE OF state ON runs FOR EACH ROW
	WHEN (OLD.state = 'running' AND NEW.state <> 'running') EXECUTE FUNCTION pipec_run_ended();
`},
	{15, "event times set by the statements that write events", `
-- An event's time is never before the time of the event logged before it:
-- each statement that writes events now takes their time as the later of
-- the clock and the last event's (eventTime in the store's code), reading
-- the last event once per statement, not once per row in a trigger (a
-- plpgsql call for each of the five or so events of every task).
DROP TRIGGER events_time ON events;
DROP FUNCTION pipec_event_time();
`},
	{16, "claims read the ready tasks only", `
-- A claim reads the ready tasks (work_open); the index of the tasks left to
-- do kept them too, so a planner whose statistics predate a big submit (a
-- table analyzed while its tasks were done: to it, that index looks
-- empty) could walk it for the ready ones, every task left to do read at
-- every claim. Without the ready tasks it answers no claim; whether a run
-- has a task left asks it and work_open, a probe each.
DROP INDEX work_unfinished;
CREATE INDEX work_blocked_or_claimed ON work (run) WHERE state IN ('blocked', 'claimed');
`},
	{17, "claims read the ready tasks in their order", `
-- A claim reads the first ready tasks by run, then task. work_open held the
-- ready (and claimed) tasks by state and run only, so its plan read every
-- ready task of every run and sorted them for a page of four: a backfill
-- with thousands of ready tasks paid for all of them at every claim. The
-- ready tasks now have an index in the claim's own order, which the claim
-- walks for its page and stops; the claimed tasks and the blocked ones an
-- index each (by run: a finish finds its claim there, and whether a run
-- has a task left is a probe of each), so a claim writes three index
-- entries where it wrote four.
DROP INDEX work_open;
DROP INDEX work_blocked_or_claimed;
CREATE INDEX work_ready ON work (run COLLATE "C", task COLLATE "C") WHERE state = 'ready';
CREATE INDEX work_claimed ON work (run) WHERE state = 'claimed';
CREATE INDEX work_blocked ON work (run) WHERE state = 'blocked';
`},
	{18, "a finish probes its own claim", `
-- A visit's end finds its claimed row by run and task. A planner whose
-- statistics predate the claims (a table analyzed before a big submit, or
-- never) prefers the small work_claimed to the primary key, and with it
-- keyed by run alone it read every claimed task of the run at each finish:
-- with hundreds of slots busy on one run, hundreds of rows where one will
-- do. Keyed by run and task, either index is one probe.
DROP INDEX work_claimed;
CREATE INDEX work_claimed ON work (run, task) WHERE state = 'claimed';
`},
	{19, "per-task rows checked by their types", `
-- A table's CHECK constraints are read from the catalog's text and planned
-- again by every statement that writes the table: the executor keeps them
-- for that one statement. A domain's checks are planned once per
-- connection. The rows every task writes several times (its claim, its
-- dependents' waits, its attempt, its token) now check the same values by
-- their columns' domains: the same values are refused, with the same
-- SQLSTATE, for some 10 µs less of the server's CPU per statement.
-- Changing the types rewrites the three tables once.
CREATE DOMAIN pipec_work_state AS text
	CHECK (VALUE IN ('blocked', 'ready', 'claimed', 'succeeded', 'failed', 'not_run'));
CREATE DOMAIN pipec_attempt_state AS text
	CHECK (VALUE IN ('queued', 'running', 'succeeded', 'failed', 'unknown'));
CREATE DOMAIN pipec_positive_integer AS integer CHECK (VALUE > 0);
CREATE DOMAIN pipec_positive_bigint AS bigint CHECK (VALUE > 0);
ALTER TABLE work DROP CONSTRAINT work_state_check,
	ALTER COLUMN state TYPE pipec_work_state;
ALTER TABLE attempts DROP CONSTRAINT attempts_state_check, DROP CONSTRAINT attempts_number_check,
	ALTER COLUMN state TYPE pipec_attempt_state, ALTER COLUMN number TYPE pipec_positive_integer;
ALTER TABLE tokens DROP CONSTRAINT tokens_last_check,
	ALTER COLUMN last TYPE pipec_positive_bigint;
-- The dependents' states, returned as text as before.
CREATE OR REPLACE FUNCTION pipec_step_dependents(p_run text, p_tasks text[]) RETURNS SETOF text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	t text;
BEGIN
	FOREACH t IN ARRAY p_tasks LOOP
		RETURN QUERY UPDATE work SET waiting_on = waiting_on - 1,
			state = CASE WHEN waiting_on = 1 AND state = 'blocked' THEN 'ready' ELSE state END
		WHERE run = p_run AND task = t RETURNING work.state::text;
	END LOOP;
END
$$;
`},
	{20, "pointer generations", `
-- How many swaps moved the pointers of each sink (PointersGeneration), in
-- the swaps' own transactions: a process that saw every pointer of a sink
-- at one generation reads this row, not every pointer, to know that none
-- moved since (a backfill's runs each reconcile the sink at their start).
-- A swap's update holds the row until its commit, so generations follow
-- the order the swaps commit.
CREATE TABLE pointer_generations (
	pipeline   text NOT NULL,
	sink       text NOT NULL,
	generation bigint NOT NULL CHECK (generation > 0),
	PRIMARY KEY (pipeline, sink)
);
`},
	{21, "gc holds on the artifact versions", `
-- pipec gc holds the artifact versions while it removes some
-- (store.Collection), under a lease on the server's clock: a run puts no
-- output into an artifact store while a hold is live.
CREATE TABLE collections (
	holder text PRIMARY KEY,
	since  timestamptz NOT NULL,
	expiry timestamptz NOT NULL
);
`},
	{22, "task digests of a run", `
-- Each task's definition as the run's plan had it (store.Run.TaskDigests,
-- a JSON object): a later run reuses a task's results only from a run that
-- defined it alike. '' for runs made before.
ALTER TABLE runs ADD COLUMN task_digests text NOT NULL DEFAULT '';
`},
	{23, "forced runs", `
-- A run asked to run every task again (store.Run.Forced): it reuses nothing
-- from earlier runs of its interval, whoever visits its tasks.
ALTER TABLE runs ADD COLUMN forced boolean NOT NULL DEFAULT false;
`},
	{24, "an attempt's reads of other intervals", `
-- The versions of other intervals an attempt was given as inputs
-- (store.Attempt.Reads, a JSON array), written with its end: a later run
-- reuses its result only while each is still its interval's accepted
-- version. '' for none, and for attempts ended before.
ALTER TABLE attempts ADD COLUMN reads text NOT NULL DEFAULT '';
`},
	{25, "a run's retries", `
-- The retries the run's tasks took from its retry budget (store.TakeRetry),
-- counted once for every process that runs its tasks.
ALTER TABLE runs ADD COLUMN retries integer NOT NULL DEFAULT 0;
`},
}

// SchemaVersion is the schema version this code writes.
func SchemaVersion() int { return migrations[len(migrations)-1].version }

// migrationLock is the advisory lock key under which schemas are migrated, so
// several workers starting at once migrate one after another.
const migrationLock = 0x70697065630001 // "pipec" + 1

// migrate brings the schema up to date in one transaction, under an advisory
// lock. A database written by a newer pipec is refused rather than guessed at.
func (s *Store) migrate(ctx context.Context) error {
	var current int
	err := s.read().QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&current)
	if err == nil && current == SchemaVersion() {
		return nil // up to date: no lock, no write
	}
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
	version integer PRIMARY KEY,
	name    text NOT NULL
)`); err != nil {
			return fmt.Errorf("create schema_version: %w", err)
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&current); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if latest := SchemaVersion(); current > latest {
			return fmt.Errorf("database schema version %d is newer than this pipec supports (%d)", current, latest)
		}
		for _, m := range migrations {
			if m.version <= current {
				continue
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %d (%s): %w", m.version, m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return fmt.Errorf("record migration %d: %w", m.version, err)
			}
		}
		return nil
	})
}
