package sqlite

import (
	"context"
	_ "embed"
	"fmt"
)

// migration is one step of the schema. Steps are applied in order, each in the
// transaction that records its version, and are never edited once released:
// a change to the schema is a new step appended to migrations.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations is the schema's history. Times are INTEGER unix nanoseconds on
// the store's clock, 0 meaning unset.
var migrations = []migration{
	{1, "initial schema", `
CREATE TABLE runs (
	id             TEXT PRIMARY KEY,
	pipeline       TEXT NOT NULL,
	interval_key   TEXT NOT NULL,
	seq            INTEGER NOT NULL,
	interval_start INTEGER NOT NULL,
	interval_end   INTEGER NOT NULL,
	code_version   TEXT NOT NULL,
	plan_digest    TEXT NOT NULL,
	state          TEXT NOT NULL CHECK (state IN ('running', 'succeeded', 'failed')),
	created        INTEGER NOT NULL,
	finished       INTEGER NOT NULL DEFAULT 0,
	UNIQUE (pipeline, interval_key, seq)
);

CREATE TABLE tokens (
	resource TEXT PRIMARY KEY,
	last     INTEGER NOT NULL CHECK (last > 0)
);

CREATE TABLE attempts (
	run          TEXT NOT NULL REFERENCES runs(id),
	task         TEXT NOT NULL,
	number       INTEGER NOT NULL CHECK (number > 0),
	resource     TEXT NOT NULL,
	token        INTEGER NOT NULL,
	state        TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'unknown')),
	class        TEXT NOT NULL DEFAULT '',
	exit_code    INTEGER NOT NULL DEFAULT 0,
	error_tail   TEXT NOT NULL DEFAULT '',
	started      INTEGER NOT NULL DEFAULT 0,
	ended        INTEGER NOT NULL DEFAULT 0,
	lease_ms     INTEGER NOT NULL DEFAULT 0,
	lease_expiry INTEGER NOT NULL DEFAULT 0,
	worker       TEXT NOT NULL DEFAULT '',
	pid          INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (run, task, number),
	UNIQUE (resource, token)
);
CREATE INDEX attempts_lease ON attempts (state, lease_expiry);

CREATE TABLE versions (
	id           INTEGER PRIMARY KEY,
	artifact     TEXT NOT NULL,
	interval_key TEXT NOT NULL,
	digest       TEXT NOT NULL,
	run          TEXT NOT NULL,
	task         TEXT NOT NULL,
	attempt      INTEGER NOT NULL,
	token        INTEGER NOT NULL,
	code_version TEXT NOT NULL,
	staging_path TEXT NOT NULL,
	state        TEXT NOT NULL CHECK (state IN ('staged', 'accepted', 'rejected')),
	reason       TEXT NOT NULL DEFAULT '',
	created      INTEGER NOT NULL,
	FOREIGN KEY (run, task, attempt) REFERENCES attempts (run, task, number),
	UNIQUE (artifact, interval_key, digest, run, task, attempt)
);
CREATE INDEX versions_accepted ON versions (artifact, interval_key, state, token);

CREATE TABLE pointers (
	sink         TEXT NOT NULL,
	artifact     TEXT NOT NULL,
	interval_key TEXT NOT NULL,
	version      INTEGER NOT NULL REFERENCES versions(id),
	token        INTEGER NOT NULL,
	unfenced     INTEGER NOT NULL DEFAULT 0,
	updated      INTEGER NOT NULL,
	PRIMARY KEY (sink, artifact, interval_key)
);

CREATE TABLE events (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	run     TEXT NOT NULL,
	time    INTEGER NOT NULL,
	kind    TEXT NOT NULL,
	task    TEXT NOT NULL DEFAULT '',
	attempt INTEGER NOT NULL DEFAULT 0,
	payload TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_run ON events (run, seq);

-- The event log is append-only: the database itself refuses edits.
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
`},
	{2, "token epochs", `
-- The epoch is folded into every token (epoch * 1e9 + n) and recorded with
-- synchronous=FULL before a handle grants its first token.
CREATE TABLE epochs (
	id    INTEGER PRIMARY KEY CHECK (id = 1),
	epoch INTEGER NOT NULL
);
INSERT INTO epochs (id, epoch) VALUES (1, 0);
`},
	{3, "state identity, pipeline scope, run leases", `
-- A random identity made once, when the database is created: a sink records
-- which state publishes to it by this id.
CREATE TABLE state_identity (
	id       INTEGER PRIMARY KEY CHECK (id = 1),
	state_id TEXT NOT NULL
);
` + newStateIdentity + `;

-- Versions and pointers are scoped by pipeline: two pipelines sharing one
-- state file with the same artifact names never see each other's data.
ALTER TABLE versions ADD COLUMN pipeline TEXT NOT NULL DEFAULT '';
UPDATE versions SET pipeline = COALESCE((SELECT pipeline FROM runs WHERE runs.id = versions.run), '');
DROP INDEX versions_accepted;
CREATE INDEX versions_accepted ON versions (pipeline, artifact, interval_key, state, token);

CREATE TABLE pointers_scoped (
	pipeline     TEXT NOT NULL,
	sink         TEXT NOT NULL,
	artifact     TEXT NOT NULL,
	interval_key TEXT NOT NULL,
	version      INTEGER NOT NULL REFERENCES versions(id),
	token        INTEGER NOT NULL,
	unfenced     INTEGER NOT NULL DEFAULT 0,
	updated      INTEGER NOT NULL,
	PRIMARY KEY (pipeline, sink, artifact, interval_key)
);
INSERT INTO pointers_scoped (pipeline, sink, artifact, interval_key, version, token, unfenced, updated)
SELECT COALESCE(v.pipeline, ''), p.sink, p.artifact, p.interval_key, p.version, p.token, p.unfenced, p.updated
FROM pointers p LEFT JOIN versions v ON v.id = p.version;
DROP TABLE pointers;
ALTER TABLE pointers_scoped RENAME TO pointers;

-- Fence at grant looks up the highest token of a task in a resource.
CREATE INDEX attempts_task_token ON attempts (resource, task, token);

-- One run per (pipeline, interval) at a time: the holder renews its lease;
-- an expired lease may be taken over.
CREATE TABLE run_leases (
	pipeline     TEXT NOT NULL,
	interval_key TEXT NOT NULL,
	run          TEXT NOT NULL REFERENCES runs(id),
	host         TEXT NOT NULL,
	pid          INTEGER NOT NULL,
	since        INTEGER NOT NULL,
	expiry       INTEGER NOT NULL,
	PRIMARY KEY (pipeline, interval_key)
);
`},
	{4, "fence at grant without an index of its own", `
-- Every attempt insert paid a page write for this index, used only when a
-- version is published; UNIQUE (resource, token) already narrows that
-- lookup to the resource's attempts.
DROP INDEX IF EXISTS attempts_task_token;
`},
	{5, "events without AUTOINCREMENT", `
-- AUTOINCREMENT made every event insert update sqlite_sequence as well: one
-- more page written per transaction. Events are never deleted (the triggers
-- refuse it), so a plain rowid key still only grows.
DROP TRIGGER events_no_update;
DROP TRIGGER events_no_delete;
CREATE TABLE events_rowid (
	seq     INTEGER PRIMARY KEY,
	run     TEXT NOT NULL,
	time    INTEGER NOT NULL,
	kind    TEXT NOT NULL,
	task    TEXT NOT NULL DEFAULT '',
	attempt INTEGER NOT NULL DEFAULT 0,
	payload TEXT NOT NULL DEFAULT ''
);
INSERT INTO events_rowid (seq, run, time, kind, task, attempt, payload)
SELECT seq, run, time, kind, task, attempt, payload FROM events;
DROP TABLE events;
ALTER TABLE events_rowid RENAME TO events;
CREATE INDEX events_run ON events (run, seq);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
`},
	{6, "attempt processes", `
-- Who ran an attempt, so that a rerun after a kill -9 of pipec can find its
-- orphaned processes on this machine: a pid alone is no name (pids are
-- reused), the pid with its start time (clock ticks after boot) and the boot
-- id are.
ALTER TABLE attempts ADD COLUMN host       TEXT    NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN boot_id    TEXT    NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN pgid       INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN proc_start INTEGER NOT NULL DEFAULT 0;

-- Leases are judged on a clock that does not step (package clock):
-- *_until counts nanoseconds on the lease clock of boot *_boot; a lease of
-- another boot has expired. lease_expiry and expiry stay on the wall clock,
-- for people.
ALTER TABLE attempts ADD COLUMN lease_boot  TEXT    NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
ALTER TABLE run_leases ADD COLUMN expiry_boot  TEXT    NOT NULL DEFAULT '';
ALTER TABLE run_leases ADD COLUMN expiry_until INTEGER NOT NULL DEFAULT 0;
`},
	{7, "workers and their work", `
-- Workers on one machine sharing this file (pipec worker) register and
-- heartbeat. A worker is live while its lease (expiry_until on the lease
-- clock of boot expiry_boot) runs; last_seen and started are wall-clock
-- times, for people. labels are those it offers, a sorted JSON array.
CREATE TABLE workers (
	name         TEXT PRIMARY KEY,
	host         TEXT NOT NULL,
	pid          INTEGER NOT NULL,
	slots        INTEGER NOT NULL,
	labels       TEXT NOT NULL DEFAULT '[]',
	state        TEXT NOT NULL CHECK (state IN ('live', 'stopping', 'stopped')),
	started      INTEGER NOT NULL,
	last_seen    INTEGER NOT NULL,
	expiry_boot  TEXT NOT NULL,
	expiry_until INTEGER NOT NULL
);

-- A run handed to the workers: its plan, where its spec lives, and what it
-- waits for when no worker can take a task.
CREATE TABLE submissions (
	run            TEXT PRIMARY KEY REFERENCES runs(id),
	plan           TEXT NOT NULL,
	base_dir       TEXT NOT NULL,
	interval_value TEXT NOT NULL,
	waiting        TEXT NOT NULL DEFAULT ''
);

-- One row per task of a submitted run: the DAG's state, advanced in the
-- transactions that finish a task's visit, and the task's failover story
-- (internal/failover.State as JSON). A claim's lease is on the lease clock.
-- labels are those the task requires, a sorted JSON array: a worker claims
-- it only when it offers them all.
CREATE TABLE work (
	run          TEXT NOT NULL REFERENCES runs(id),
	task         TEXT NOT NULL,
	state        TEXT NOT NULL CHECK (state IN ('blocked', 'ready', 'claimed', 'succeeded', 'failed', 'not_run')),
	waiting_on   INTEGER NOT NULL,
	dependents   TEXT NOT NULL,
	limits       TEXT NOT NULL,
	labels       TEXT NOT NULL DEFAULT '[]',
	failover     TEXT NOT NULL DEFAULT '{}',
	worker       TEXT NOT NULL DEFAULT '',
	claim_boot   TEXT NOT NULL DEFAULT '',
	claim_until  INTEGER NOT NULL DEFAULT 0,
	reason       TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (run, task)
);
CREATE INDEX work_open ON work (state, run, task) WHERE state IN ('ready', 'claimed');

-- Bumped by every transaction that may have made a task ready, so idle
-- workers poll one small row (after PRAGMA data_version says something
-- changed) instead of the work table.
CREATE TABLE work_signal (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	n  INTEGER NOT NULL
);
INSERT INTO work_signal (id, n) VALUES (1, 0);
`},
	{8, "work by run and state", `
-- Whether a run has any task left (or any failed) is asked on every finish
-- of a task without dependents: with this index it is a probe, not a scan
-- of the run's tasks (quadratic over a run of a thousand).
CREATE INDEX work_run_state ON work (run, state);
`},
	{9, "version locations", `
-- A version's files are in the pipeline's artifact store (runtime/artifacts),
-- named by a location key "<pipeline>/<artifact>/<hex digest>", not by a path
-- on the disk of the machine that produced them.
ALTER TABLE versions RENAME COLUMN staging_path TO location;
-- Versions frozen before were at <state folder>/versions/<key>, which is a
-- local run's default artifact store: they become keys in it. Any other path
-- stays as it was and is read as a path on this machine.
UPDATE versions SET location = pipeline || '/' || artifact || '/' || substr(digest, 8)
WHERE pipeline <> '' AND digest LIKE 'sha256:%'
AND substr(location, -length('/versions/' || pipeline || '/' || artifact || '/' || substr(digest, 8)))
	= '/versions/' || pipeline || '/' || artifact || '/' || substr(digest, 8);
`},
	{10, "work pools", `
-- A task's pool, "<pipeline>/<pool>" (queue.PoolKey), and its slots: a claim
-- counts the pool's claimed tasks across runs and workers.
ALTER TABLE work ADD COLUMN pool TEXT NOT NULL DEFAULT '';
ALTER TABLE work ADD COLUMN pool_slots INTEGER NOT NULL DEFAULT 0;
CREATE INDEX work_pool_claimed ON work (pool) WHERE state = 'claimed' AND pool <> '';
`},
	{11, "cancelled runs", `
-- A cancelled run (pipec cancel) is failed, with why and by whom here: a
-- pipec that does not know cancellation sees a failed run.
ALTER TABLE runs ADD COLUMN cancelled TEXT NOT NULL DEFAULT '';
`},
	{12, "lease index of leased attempts only", `
-- Only MarkUnknown reads this index, and only for running attempts with a
-- lease. Indexing every attempt made each state change (queued, running,
-- finished) rewrite an index page: most attempts of a local run are queued
-- and then finished without a lease, and now touch no page of it.
DROP INDEX attempts_lease;
CREATE INDEX attempts_lease ON attempts (state, lease_expiry) WHERE state = 'running' AND lease_expiry > 0;
`},
	{13, "a task's attempts by resource, again", `
-- Every task's visit reads its own earlier attempts (TaskAttempts: by
-- resource and task, in token order), since the one runtime decides before
-- each task runs. Migration 4 dropped this index when only a publish used
-- it; without it UNIQUE (resource, token) serves the read by scanning every
-- attempt of the pipeline@interval, O(n^2) rows over an n-task run
-- (BenchmarkTaskAttempts). It costs one index page per attempt insert.
CREATE INDEX attempts_task_token ON attempts (resource, task, token);
`},
	{14, "pool slots held outside the claims", `
-- A pool slot held by a visit another engine dispatches (queue.PoolSlots),
-- one per task of a run, under a lease on the lease clock (as the claims'):
-- a claim counts the live ones beside its claimed work rows.
CREATE TABLE pool_holds (
	pool         TEXT NOT NULL,
	run          TEXT NOT NULL,
	task         TEXT NOT NULL,
	worker       TEXT NOT NULL,
	since        INTEGER NOT NULL,
	expiry_boot  TEXT NOT NULL,
	expiry_until INTEGER NOT NULL,
	PRIMARY KEY (pool, run, task)
);
`},
	{15, "run ends signal", `
-- A run that ends, however it ends (its last task, a cancel, a takeover),
-- bumps this counter in its own transaction, so a follower (pipec submit
-- --wait, a submitted backfill) that watches it (RunEnded, as Wakeups
-- watches work_signal) sees the end at once, not at its next look.
CREATE TABLE run_end_signal (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	n  INTEGER NOT NULL
);
INSERT INTO run_end_signal (id, n) VALUES (1, 0);
CREATE TRIGGER runs_ended AFTER UPDATE OF state ON runs
WHEN OLD.state = 'running' AND NEW.state <> 'running'
BEGIN
	UPDATE run_end_signal SET n = n + 1 WHERE id = 1;
END;
`},
	{16, "pointer generations", `
-- How many swaps moved the pointers of each sink (PointersGeneration), in
-- the swaps' own transactions: a process that saw every pointer of a sink
-- at one generation reads this row, not every pointer, to know that none
-- moved since (a backfill's runs each reconcile the sink at their start).
CREATE TABLE pointer_generations (
	pipeline   TEXT NOT NULL,
	sink       TEXT NOT NULL,
	generation INTEGER NOT NULL CHECK (generation > 0),
	PRIMARY KEY (pipeline, sink)
);
`},
	{17, "gc holds on the artifact versions", `
-- pipec gc holds the artifact versions while it removes some
-- (store.Collection), under a lease on the lease clock: a run puts no
-- output into an artifact store while a hold is live.
CREATE TABLE collections (
	holder       TEXT PRIMARY KEY,
	since        INTEGER NOT NULL,
	expiry       INTEGER NOT NULL,
	expiry_boot  TEXT NOT NULL,
	expiry_until INTEGER NOT NULL
);
`},
	{18, "task digests of a run", `
-- Each task's definition as the run's plan had it (store.Run.TaskDigests,
-- a JSON object): a later run reuses a task's results only from a run that
-- defined it alike. '' for runs made before.
ALTER TABLE runs ADD COLUMN task_digests TEXT NOT NULL DEFAULT '';
`},
	{19, "forced runs", `
-- A run asked to run every task again (store.Run.Forced): it reuses nothing
-- from earlier runs of its interval, whoever visits its tasks.
ALTER TABLE runs ADD COLUMN forced INTEGER NOT NULL DEFAULT 0;
`},
	{20, "an attempt's reads of other intervals", `
-- The versions of other intervals an attempt was given as inputs
-- (store.Attempt.Reads, a JSON array), written with its end: a later run
-- reuses its result only while each is still its interval's accepted
-- version. '' for none, and for attempts ended before.
ALTER TABLE attempts ADD COLUMN reads TEXT NOT NULL DEFAULT '';
`},
	{21, "a run's retries", `
-- The retries the run's tasks took from its retry budget (store.TakeRetry),
-- counted once for every process that runs its tasks.
ALTER TABLE runs ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;
`},
}

// SchemaVersion is the schema version this code writes.
func SchemaVersion() int { return migrations[len(migrations)-1].version }

// newStateIdentity gives a new state its random identity.
const newStateIdentity = `INSERT INTO state_identity (id, state_id) VALUES (1, lower(hex(randomblob(16))))`

// schemaVersionTable records the migrations applied; migrate makes it first.
const schemaVersionTable = `CREATE TABLE IF NOT EXISTS schema_version (
	version INTEGER PRIMARY KEY,
	name    TEXT NOT NULL
)`

// freshSchema is the schema the migrations end with, and the rows they
// write, as one script: TestFreshSchemaIsTheMigrations generates it from
// them and checks that a state made by it holds what a state migrated step
// by step does. Replaying the migrations made SQLite parse its whole schema
// again after each ALTER TABLE: BenchmarkNewState puts the two side by
// side (on tmpfs 6.1-6.5 ms against 2.0), a cost every first run in a new
// folder pays.
//
//go:embed schema_fresh.sql
var freshSchema string

// migrate brings the schema up to date in one transaction. A database written
// by a newer pipec (a higher version than this code knows) is refused rather
// than guessed at. A new, empty database is made by freshSchema at once.
func migrate(ctx context.Context, tx *wtx) error {
	if err := tx.script(ctx, schemaVersionTable); err != nil {
		return fmt.Errorf("create schema_version: %w", err)
	}
	var current, objects int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0), (SELECT count(*) FROM sqlite_master) FROM schema_version`).Scan(&current, &objects); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if latest := SchemaVersion(); current > latest {
		return fmt.Errorf("database schema version %d is newer than this pipec supports (%d)", current, latest)
	}
	if current == 0 && objects == 1 { // schema_version alone
		if err := tx.script(ctx, freshSchema); err != nil {
			return fmt.Errorf("new schema: %w", err)
		}
		if _, err := tx.ExecContext(ctx, newStateIdentity); err != nil {
			return fmt.Errorf("new state identity: %w", err)
		}
		return nil
	}
	for _, m := range migrations {
		if m.version <= current {
			continue
		}
		if err := tx.script(ctx, m.sql); err != nil {
			return fmt.Errorf("migration %d (%s): %w", m.version, m.name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, name) VALUES (?, ?)`, m.version, m.name); err != nil {
			return fmt.Errorf("record migration %d: %w", m.version, err)
		}
	}
	return nil
}
