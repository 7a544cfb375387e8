package store

// EventKind names one kind of entry in a run's event log.
type EventKind string

// EventKindDoc is a registered event kind and what it records.
type EventKindDoc struct {
	Kind EventKind
	Doc  string
}

// EventKinds is every kind pipec records in a run's event log, each with
// what it means, written once: the store's, the runtime's and the workers'
// queue's Event* constants are these strings, and schema/events.schema.json
// is checked against this list (cli's events schema test), so a kind can
// neither be recorded without being documented nor documented without
// being recorded.
func EventKinds() []EventKindDoc {
	return []EventKindDoc{
		{"run.created", "a run began: its interval, code_version and plan digest"},
		{"run.submitted", "a run was handed to the workers of a shared state, with its number of tasks"},
		{"run.waiting", "a run waits: no live worker may start its next task, its pool is full, or pipec gc is removing versions (a task's outputs wait)"},
		{"run.finished", "a run ended, succeeded or failed"},
		{"run.abandoned", "a run whose pipec died was ended by a later run of its interval; its open attempts became unknown"},
		{"run.superseded", "this run took its interval over from a run that never finished"},
		{"run.cancelled", "pipec cancel ended the run: who and why"},
		{"attempt.started", "a token was granted to an attempt of a task (queued or running)"},
		{"attempt.running", "an attempt's process started: pid, token, log"},
		{"attempt.unknown", "an attempt's lease expired, or its claim's: nobody knows how it ends"},
		{"attempt.finished", "an attempt ended: succeeded, failed, or unknown (stopped with its effect unseen)"},
		{"attempt.retry", "a failed attempt is retried: class, delay, next attempt"},
		{"attempt.relaunch", "an attempt whose lease expired was relaunched without waiting for it"},
		{"attempt.abandoned", "a relaunched attempt still running when the run ended was killed"},
		{"attempt.orphans_ended", "processes an earlier attempt left running were ended before the task started again"},
		{"attempt.resolved", "pipec resolve settled an unknown attempt: as, reason, by"},
		{"task.reused", "a task was not run: an earlier run's results are current"},
		{"task.outdated", "a task runs again although an earlier run made its results: why they are out of date (the task or a check of its outputs edited, what it needs or read rebuilt, its output gone)"},
		{"task.adopted", "a non-idempotent task was completed from its succeeded attempt of an earlier run"},
		{"task.unknown", "a non-idempotent task was not run: an earlier attempt of it may have taken effect"},
		{"task.not_run", "a task was not run: what it needs failed or was not run, an input is missing, or the run was interrupted"},
		{"task.failed", "a task failed: class, exit code, error tail, reason"},
		{"task.succeeded", "a task succeeded (the runtime's progress feed only; its attempt.finished is in the log)"},
		{"version.recorded", "an output was frozen and recorded as a version, with the attempt's token"},
		{"version.accepted", "a version passed its checks and is in the artifact store"},
		{"version.rejected", "a version failed a check or could not be stored"},
		{"version.reopened", "a rejected version of a non-idempotent task's output is audited again: a check of it is new or edited since"},
		{"output.rejected", "an attempt's output never became a version (a link or a device in its folder, a file it cannot read): why"},
		{"output.left", "an attempt's output left staged and unaudited because the run was stopped (Ctrl-C, its lease on the interval lost): why; the next run audits it"},
		{"check.passed", "a check accepted a version"},
		{"check.failed", "a check rejected a version: why"},
		{"publish.won", "a publish made its version visible"},
		{"publish.idempotent", "a publish found its version visible already"},
		{"publish.fenced", "a publish was refused: a newer token was granted or published"},
		{"publish.conflict", "a publish found the pointer moved since it read it"},
		{"publish.failed", "a publish could not be made: the sink's error"},
		{"sink.reconciled", "a sink's links were brought in line with the state after a crash"},
		{"tokens.raised", "a state's tokens were moved above what an adopted sink has seen"},
		{"work.claimed", "a worker claimed a task of a submitted run"},
		{"work.succeeded", "a worker's visit of a task succeeded"},
		{"work.handed_back", "a worker shutting down handed a task back (counted nowhere)"},
		{"work.failover", "a task moves to another worker: why, and the failover counts"},
		{"work.stopped", "a task stops failing over: its limits are reached, or its failure is deterministic"},
		{"work.lease_lost", "a worker's lease on a task expired (paused, killed or cut off)"},
		{"work.not_run", "a task of a submitted run was not run: what it needs failed or was not run"},
	}
}
