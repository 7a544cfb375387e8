// Package store is the runtime's durable state: runs, attempts, fencing tokens,
// artifact versions, sink pointers and an append-only event log.
//
// Everything a restart needs lives here and nowhere else. Every method that
// changes state runs as one transaction that is committed before the method
// returns, so a caller may act on a returned value (launch a process with a
// token, swap a link after a won compare-and-swap) knowing the store already
// holds it.
//
// # Durability
//
// Two things must never be lost, not even to an OS crash or a power cut: a
// fencing token once granted (else the same token could be handed out
// twice, and a sink that saw the first holder's token would accept the
// second's writes as equal), and a pointer once swapped (else a reader who
// saw the new version could later see the old one again). Every backend
// keeps both, each in its own way (a durable token epoch, and swaps on
// stable storage before they return: see runtime/store/sqlite and
// runtime/store/postgres). Any other write may be lost to a crash only in
// ways a rerun already handles.
//
// # Implementations
//
// runtime/store/sqlite (an embedded SQLite file, the default) and
// runtime/store/postgres (a PostgreSQL server); runtime/store/backend
// opens a [Location] with the one it names. Each also implements the
// workers' queue (runtime/queue); runtime/store/storetest is the
// conformance suite every backend runs.
//
// # Clock
//
// Leases are judged against one clock only: the store's. Every time the store
// writes (created, started, lease expiry, event time) comes from its [Clock],
// which tests replace. Callers pass lease durations, never absolute times.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pipec/pipec/runtime/fence"
)

// EpochSpan is how many tokens one epoch holds: every backend grants a
// token as epoch*EpochSpan + n, readable in decimal (epoch 3, grant 17:
// 3000000017), so the first grant of a new epoch (after a crash took the
// last one back) is above every token granted before it.
const EpochSpan = 1_000_000_000

// Clock returns the current time. The store judges lease expiry with it alone,
// so two machines' clocks are never compared.
type Clock func() time.Time

// Errors callers can test with errors.Is.
var (
	// ErrNotFound: the run, attempt, version or pointer does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the change contradicts the recorded state (finishing an
	// attempt twice with different outcomes, publishing a version that is not
	// accepted, a token that is not the version's own, a duplicate id).
	ErrConflict = errors.New("conflict with recorded state")
	// ErrLeaseLost: the attempt is no longer running (it was marked unknown or
	// finished) or the token is not its own; a heartbeat must stop and the task
	// should expect to be fenced.
	ErrLeaseLost = errors.New("lease lost")
	// ErrRunBusy: another run of the pipeline's interval holds a live lease
	// (see RunBusyError for who).
	ErrRunBusy = errors.New("another run of the interval is in progress")
	// ErrUnreachable: the state's database server does not answer (down,
	// restarting, cut off): worth trying again, unlike a wrong address.
	ErrUnreachable = errors.New("the state database does not answer")
	// ErrDiskFull: the disk under the store refused a write: full, over a
	// file size limit or a quota, failing, or read-only. Each backend
	// tells it by its database's own codes, never by a message's words
	// (SQLite: the SQLITE_FULL, SQLITE_IOERR and SQLITE_READONLY result
	// codes; PostgreSQL: SQLSTATE 53100, disk_full). Nothing the caller
	// gave is wrong: the disk needs fixing, and a rerun resumes.
	ErrDiskFull = errors.New("disk full or not writable")
)

// RunState is the state of a run.
type RunState string

const (
	RunRunning   RunState = "running"
	RunSucceeded RunState = "succeeded"
	RunFailed    RunState = "failed"
	// RunCancelled: ended by pipec cancel (Run.Cancelled says who and why).
	// Stored as failed, so it is failed to everything that asks for
	// failed runs.
	RunCancelled RunState = "cancelled"
)

// CancelledBy is how a cancellation is recorded (Run.Cancelled): "by WHO:
// REASON".
func CancelledBy(by, reason string) string { return "by " + by + ": " + reason }

// Ended reports whether the run is over (any state but running).
func (s RunState) Ended() bool { return s != RunRunning }

// AttemptState is the state of one attempt. queued -> running -> succeeded |
// failed, plus unknown: running in the store but its lease expired. An unknown
// attempt is neither dead nor alive; its successor gets a higher token.
type AttemptState string

const (
	AttemptQueued    = AttemptState(fence.Queued)
	AttemptRunning   = AttemptState(fence.Running)
	AttemptSucceeded = AttemptState(fence.Succeeded)
	AttemptFailed    = AttemptState(fence.Failed)
	AttemptUnknown   = AttemptState(fence.Unknown)
)

// Finished reports whether the state is terminal (succeeded or failed).
func (s AttemptState) Finished() bool { return fence.State(s).Finished() }

// Recordable reports whether FinishAttempt records the state as an
// attempt's end: succeeded, failed, or unknown (the attempt's process
// ended, but how it ended says nothing of whether its effect happened: a
// non-idempotent attempt interrupted by pipec or killed by someone else).
func (s AttemptState) Recordable() bool { return s.Finished() || s == AttemptUnknown }

// CheckEnd refuses to record o as the end of attempt ref when its state
// is not one (Recordable), before a store touches its tables.
func (o Outcome) CheckEnd(ref AttemptRef) error {
	if !o.State.Recordable() {
		return fmt.Errorf("finish attempt %s: state %q is not an end", ref, o.State)
	}
	return nil
}

// Another says whether cur, the attempt now recorded under the number of
// the one worker's visit ended, is another attempt: of another worker, or
// of another token than the end assumed (o.Was). A crash of the state took
// back the one that ended, and a claim recorded a new one under the same
// number. A visit whose claim is gone records no such end
// (queue.Result.End): it would end an attempt it never ran.
func (o Outcome) Another(cur Attempt, worker string) bool {
	return o.Was != nil && o.Was.Token != cur.Token || cur.Worker != "" && cur.Worker != worker
}

// CheckFinish is FinishAttempt's judgement of recording o on cur, written
// once for every store: noop when cur already holds exactly that end (a
// retried write), ErrConflict when the state machine forbids it. wasRunning
// says Outcome.Ran moves cur to running first.
func CheckFinish(cur Attempt, o Outcome, wasRunning bool) (noop bool, err error) {
	ref := cur.AttemptRef
	if err := o.CheckEnd(ref); err != nil {
		return false, err
	}
	if cur.State == o.State && cur.Class == o.Class && cur.ExitCode == o.ExitCode && cur.ErrorTail == o.ErrorTail {
		return true, nil
	}
	if o.State == AttemptUnknown && cur.State == AttemptUnknown {
		return true, nil // unknown already, whoever said so first
	}
	if cur.State.Finished() {
		return false, fmt.Errorf("finish attempt %s as %s: already %s: %w", ref, o.State, cur.State, ErrConflict)
	}
	from := cur.State
	if wasRunning {
		from = AttemptRunning
	}
	if !from.CanBecome(o.State) {
		return false, fmt.Errorf("finish attempt %s as %s: it is %s: %w", ref, o.State, from, ErrConflict)
	}
	return false, nil
}

// CanBecome reports whether the state machine (fence.CanTransition) allows
// moving to next.
func (s AttemptState) CanBecome(next AttemptState) bool {
	return fence.CanTransition(fence.State(s), fence.State(next))
}

// VersionState is the audit state of an artifact version.
type VersionState string

const (
	VersionStaged   VersionState = "staged"
	VersionAccepted VersionState = "accepted"
	VersionRejected VersionState = "rejected"
)

// Run is one execution of a pipeline for one logical interval.
type Run struct {
	// ID is "<pipeline>/<interval>/r<n>", n counting runs of that pipeline and
	// interval from 1; allocated by CreateRun.
	ID       string
	Pipeline string
	// Interval is the interval key used everywhere else (artifact versions,
	// pointers, sink paths), e.g. "2024-01-01".
	Interval      string
	IntervalStart time.Time
	IntervalEnd   time.Time
	CodeVersion   string
	PlanDigest    string
	// TaskDigests is each task's definition as the run's plan had it
	// (compiler.Plan.TaskDigests: the task's digest and its outputs'
	// checks'), by name: a later run of the interval reuses a
	// task's results only from a run that defined it alike. Nil for runs
	// recorded before pipec kept it. GetRun reads them; ListRuns and the
	// queue's status leave them nil (a large plan's are large).
	TaskDigests map[string]string
	// Forced: the run was asked to run every task again (pipec run,
	// submit or backfill --force): it reuses nothing from earlier runs of
	// the interval, whichever dispatcher visits its tasks.
	Forced  bool
	State   RunState
	Created time.Time
	// Finished is zero while the run is running.
	Finished time.Time
	// Cancelled, for a cancelled run, is who cancelled it and why.
	Cancelled string
}

// NewRun is what CreateRun needs; the store allocates the id.
type NewRun struct {
	Pipeline      string
	Interval      string
	IntervalStart time.Time
	IntervalEnd   time.Time
	CodeVersion   string
	PlanDigest    string
	TaskDigests   map[string]string
	Forced        bool
	// Owner is who runs it (host and pid), named to a second run that is
	// refused.
	Owner RunOwner
	// Lease, when positive, makes the run hold the lease on (Pipeline,
	// Interval) for that long from now, taken in the same transaction as
	// the run is created; RenewRunLease extends it. Whatever Lease says,
	// CreateRun refuses (a *RunBusyError) while another run holds a live
	// lease on the interval.
	Lease time.Duration
	// TakeOver names a run whose live lease may be taken anyway, because the
	// caller knows its owner is gone (same host, process no longer exists).
	// It is taken only if that run still holds the lease.
	TakeOver string
	// MaxActive, when positive, is the pipeline's max_active_runs: CreateRun
	// (and a queue's Submit) refuses, with a *RunSlotsError, a run of a
	// pipeline that already has MaxActive runs in progress, judged in the
	// transaction that creates the run (see CheckRunSlots), so callers in
	// any number of processes never exceed it together.
	MaxActive int
}

// RunOwner is the process that holds a run's lease.
type RunOwner struct {
	Host string
	PID  int
}

// RunBusyError is CreateRun's refusal: another run of the interval holds a
// lease that has not expired. errors.Is(err, ErrRunBusy) holds.
type RunBusyError struct {
	Run   string
	Owner RunOwner
	// Since is when the holder took the lease, Expiry when it ends unless
	// renewed (the store's clock).
	Since, Expiry time.Time
	// Submitted: the run was handed to workers (pipec submit); it holds no
	// lease and goes on until the workers end it.
	Submitted bool
}

func (e *RunBusyError) Error() string {
	return "run " + e.Run + " is in progress " + e.Holder().by()
}

// Holder is the run holding the interval, as a run in progress.
func (e *RunBusyError) Holder() RunInProgress {
	return RunInProgress{Run: e.Run, Owner: e.Owner, Since: e.Since, Submitted: e.Submitted}
}

// Is makes errors.Is(err, ErrRunBusy) true.
func (e *RunBusyError) Is(target error) bool { return target == ErrRunBusy }

// RunLease is a run's lease on its interval, as RunLeases lists it.
type RunLease struct {
	Run      string
	Interval string
	Owner    RunOwner
	// Since is when the run took the lease, Expiry when it ends unless
	// renewed (the store's clock, for people); Live is the store's own
	// judgement, the one CreateRun makes.
	Since, Expiry time.Time
	Live          bool
}

// RunFilter selects runs for ListRuns; empty fields match everything.
type RunFilter struct {
	Pipeline string
	Interval string
}

// AttemptRef names one attempt: a task's Number-th launch in a run.
type AttemptRef struct {
	Run    string
	Task   string
	Number int
}

// String is "run task#number".
func (r AttemptRef) String() string { return fmt.Sprintf("%s %s#%d", r.Run, r.Task, r.Number) }

// Attempt is one launch of one task in one run.
type Attempt struct {
	AttemptRef
	// Resource is the fenced resource Token was drawn from.
	Resource string
	Token    int64
	State    AttemptState
	// Class is the error class of a failed (or succeeded: empty) attempt.
	Class     string
	ExitCode  int
	ErrorTail string
	Started   time.Time
	Ended     time.Time
	// LeaseExpiry is zero when the attempt has no lease (queued, finished, or
	// started with Lease 0).
	LeaseExpiry time.Time
	Worker      string
	PID         int
	// Host and Boot (the boot id) name the machine and boot the attempt was
	// started on; PGID and ProcStart (clock ticks after boot) complete PID
	// into a name no other process has (see Process).
	Host      string
	Boot      string
	PGID      int
	ProcStart uint64
	// Reads are the versions of other intervals the attempt was given as
	// inputs, recorded with its end (Outcome.Reads); nil when it read
	// none, or ended before they were recorded.
	Reads []Read
}

// Read is one input of an attempt from another interval than its run's
// (raw@-1, PIPEC_INPUT_raw_PREV): the version of that interval it was
// given, and that version's content digest (0 and "" for an interval
// before the schedule's start, where it was given nothing). A task's
// result stays current only while each interval it read still accepts the
// same content (or still nothing); a rebuild there that changed it makes
// the task run again rather than be reused (docs/runtime.md).
type Read struct {
	Artifact string `json:"artifact"`
	Interval string `json:"interval"`
	Version  int64  `json:"version"`
	Digest   string `json:"digest"`
}

// FirstMoved is the first of reads whose interval no longer accepts the
// content read (its accepted version, as accepted gives its digest, has
// other content, or there is none: ""); nil when every read is current.
// The rule that reuse (runtime) and backfill --stale (schedule) apply.
func FirstMoved(reads []Read, accepted func(artifact, interval string) (digest string, err error)) (*Read, error) {
	for i, rd := range reads {
		digest, err := accepted(rd.Artifact, rd.Interval)
		if err != nil {
			return nil, err
		}
		if digest != rd.Digest {
			return &reads[i], nil
		}
	}
	return nil, nil
}

// ReadsText is reads as a store keeps them: "" for none, else a JSON
// array in the order given.
func ReadsText(reads []Read) string {
	if len(reads) == 0 {
		return ""
	}
	b, _ := json.Marshal(reads) // strings and integers: it cannot fail
	return string(b)
}

// ParseReads is ReadsText's inverse; text a store did not write so is an
// error.
func ParseReads(text string) ([]Read, error) {
	if text == "" {
		return nil, nil
	}
	var reads []Read
	if err := json.Unmarshal([]byte(text), &reads); err != nil {
		return nil, fmt.Errorf("an attempt's reads %q: %w", text, err)
	}
	return reads, nil
}

// Process returns the attempt's recorded process.
func (a Attempt) Process() Process {
	return Process{Host: a.Host, Boot: a.Boot, PID: a.PID, PGID: a.PGID, Start: a.ProcStart}
}

// AttemptSpec is what StartAttempt needs.
type AttemptSpec struct {
	Run  string
	Task string
	// Resource is the fenced resource the attempt's token is drawn from.
	// Tokens only compare within a resource, and AcceptedVersion and the
	// pointers compare tokens of different attempts and runs of one interval,
	// so use FenceResource(pipeline, interval) for every attempt of a run.
	Resource string
	Worker   string
	PID      int
	// Host and Boot name the machine and its boot (see Attempt).
	Host string
	Boot string
	// Lease is how long the attempt may go without RenewLease before
	// MarkUnknown reports it; 0 means no lease (never marked unknown).
	Lease time.Duration
	// Queued creates the attempt queued (token granted, no lease yet);
	// MarkRunning starts it. Otherwise it starts running at once.
	Queued bool
}

// FenceResource is the fenced resource of one pipeline's interval,
// "<pipeline>@<interval>": every attempt of every run of that interval draws
// its token from it, so a rerun's attempts fence a crashed run's, and
// renaming a task does not restart the count.
func FenceResource(pipeline, interval string) string { return pipeline + "@" + interval }

// Outcome is how an attempt ended, for FinishAttempt.
type Outcome struct {
	State     AttemptState // AttemptSucceeded, AttemptFailed or AttemptUnknown (Recordable)
	Class     string
	ExitCode  int
	ErrorTail string
	// Ran, when set, is the process the attempt ran as, not yet recorded:
	// FinishAttempt first records it exactly as MarkRunningAs would (same
	// row, same attempt.running event), in the same transaction. A process
	// that ended before its start was recorded so costs one write instead of
	// two. The crash semantics are those of the two writes: until the one
	// commits, the store shows the attempt as it was before the process
	// started (queued, no pid), which is what a crash between the two writes
	// would have left, and a rerun already handles (the process is found by
	// its marker, see exec.Marker; here it has already ended).
	Ran *Running
	// Was, when set, is the attempt as its caller's own writes left it
	// (queued as started, or as MarkRunningAs returned it). A store may
	// write the end assuming the row is so, each write guarded on what it
	// assumed (the attempt's state and token); when a guard misses, nothing
	// of the guess is kept and the end is decided on the row as read.
	Was *Attempt
	// Durable commits the end on stable storage (as Running.Durable): the
	// end of an attempt of a task that is not idempotent. Taken back by a
	// crash, it would leave the attempt looking started, and the task an
	// unknown for a person to settle, although its end was seen.
	Durable bool
	// Reads are the versions of other intervals the attempt was given
	// (Attempt.Reads), recorded with the end.
	Reads []Read
}

// Against is o as it ends cur, the attempt as the store reads it. When a
// crash of the state took back the record of the attempt's start after
// its caller's own writes left it running (o.Was running, cur queued
// under the same token: an asynchronous commit on PostgreSQL, or a power
// cut), the end records that process again, as Ran records a process
// whose start was never recorded: the attempt ran, and its end was seen.
func (o Outcome) Against(cur Attempt) Outcome {
	if w := o.Was; o.Ran == nil && w != nil && w.AttemptRef == cur.AttemptRef && w.Token == cur.Token &&
		w.State == AttemptRunning && cur.State == AttemptQueued {
		o.Ran = &Running{Process: w.Process()}
	}
	return o
}

// Synchronous says whether the end, or the start it records with it
// (Ran), must be on stable storage when the write returns.
func (o Outcome) Synchronous() bool { return o.Durable || o.Ran != nil && o.Ran.Durable }

// Version is one produced output of one attempt, identified by content digest.
type Version struct {
	// ID is allocated by RecordVersion.
	ID int64
	// Pipeline is the producing run's, set by RecordVersion: versions of
	// one pipeline never satisfy another's inputs.
	Pipeline string
	Artifact string
	Interval string
	// Digest is "sha256:<hex>" over the staged content (see sink.Digest).
	Digest      string
	Run         string
	Task        string
	Attempt     int
	Token       int64
	CodeVersion string
	// Location is where the version's files are in the pipeline's artifact
	// store: the key "<pipeline>/<artifact>/<hex digest>" (package
	// runtime/artifacts resolves it to a folder on the reading machine),
	// never a path on the disk of the worker that produced it. A version
	// recorded before the artifact store existed may hold an absolute path
	// on the machine of its local run.
	Location string
	State    VersionState
	// Reason says why a version was rejected.
	Reason  string
	Created time.Time
}

// Label is the version's human name, "artifact@interval#digest".
func (v Version) Label() string { return v.Artifact + "@" + v.Interval + "#" + v.Digest }

// Pointer is what a sink shows for (artifact, interval): one version, and the
// token that put it there.
type Pointer struct {
	Pipeline string
	Sink     string
	Artifact string
	Interval string
	Version  int64
	Token    int64
	// Unfenced is true when the last swap skipped the token check (a sink with
	// fencing = "none").
	Unfenced bool
	Updated  time.Time
}

// Swap asks CompareAndSwapPointer to point (Sink, Artifact, Interval) at
// Version with Token, the token of the attempt that produced Version.
type Swap struct {
	// Pipeline scopes the pointer: two pipelines' sinks of one name are
	// two pointers.
	Pipeline string
	Sink     string
	Artifact string
	Interval string
	Version  int64
	Token    int64
	// Unfenced skips the token comparison (fencing = "none"): the swap always
	// happens, at-least-once semantics.
	Unfenced bool
	// Expect, when not nil, makes the swap optimistic as well as fenced: it
	// happens only if the pointer's token is still *Expect (0: no pointer
	// yet), else the outcome is Conflict. Publishers that race from one base
	// read (as table formats commit) then get exactly one winner. Nil: the
	// token comparison alone decides.
	Expect *int64
}

// CASOutcome is the result of a compare-and-swap on a pointer.
type CASOutcome string

const (
	// Won: the pointer now names the version with the token.
	Won CASOutcome = "won"
	// Idempotent: the pointer already named this version with this token (a
	// repeated publish, e.g. after a lost response); nothing changed.
	Idempotent CASOutcome = "idempotent"
	// Fenced: the pointer holds a newer token (or the same token with another
	// version); nothing changed and a "publish.fenced" event was recorded.
	Fenced CASOutcome = "fenced"
	// Conflict: Swap.Expect was set and the pointer moved since; the token
	// alone would have won. Nothing changed; a "publish.conflict" event was
	// recorded.
	Conflict CASOutcome = "conflict"
)

// CASResult is the outcome and the pointer as it is after the call.
type CASResult struct {
	Outcome CASOutcome
	Pointer Pointer
	// Previous is the pointer before the call; Previous.Version is 0 when there
	// was none.
	Previous Pointer
	// GrantedToken, for a publish fenced at grant, is the higher token an
	// attempt of the producing task holds (0 otherwise).
	GrantedToken int64
	// Generation, for a Won swap, is the sink's pointer generation it made
	// (PointersGeneration); 0 for any other outcome.
	Generation int64
}

// Event kinds the store itself records. Callers may append any other kind.
const (
	EventRunCreated      = "run.created"
	EventRunFinished     = "run.finished"
	EventRunAbandoned    = "run.abandoned"
	EventAttemptStarted  = "attempt.started"
	EventAttemptRunning  = "attempt.running"
	EventAttemptUnknown  = "attempt.unknown"
	EventAttemptFinished = "attempt.finished"
	EventVersionRecorded = "version.recorded"
	EventVersionAccepted = "version.accepted"
	EventVersionRejected = "version.rejected"
	EventVersionReopened = "version.reopened"
	// EventOutputLeft: an attempt's output left staged and unaudited
	// because its run was stopped; the next run of the interval audits it
	// from the attempt's staging, which pipec gc therefore keeps.
	EventOutputLeft        = "output.left"
	EventPublishWon        = "publish.won"
	EventPublishIdempotent = "publish.idempotent"
	EventPublishFenced     = "publish.fenced"
	EventPublishConflict   = "publish.conflict"
	EventTokensRaised      = "tokens.raised"
	EventRunCancelled      = "run.cancelled"
)

// Event is one entry of the append-only log.
type Event struct {
	// Seq orders events across all runs; allocated by the store.
	Seq int64
	Run string
	// Time is the store's clock at append; set by the store.
	Time    time.Time
	Kind    string
	Task    string
	Attempt int
	// Payload is a JSON object (or empty).
	Payload json.RawMessage
}

// RetryCount is TakeRetry's answer: the run's tasks that have an attempt
// in it, the retries counted (this one included when Taken), and whether
// this one was.
type RetryCount struct {
	First, Used int
	Taken       bool
}

// Store is the runtime's state. Implementations: runtime/store/sqlite
// (embedded, default) and runtime/store/postgres. Every mutating method
// commits before it returns; see the package doc for durability.
type Store interface {
	// CreateRun allocates the next run id for (Pipeline, Interval) and records
	// the run as running.
	CreateRun(ctx context.Context, r NewRun) (Run, error)
	// GetRun returns the run or ErrNotFound.
	GetRun(ctx context.Context, id string) (Run, error)
	// ListRuns returns matching runs, oldest first.
	ListRuns(ctx context.Context, f RunFilter) ([]Run, error)
	// FinishRun sets the run's final state (RunSucceeded or RunFailed) and
	// releases its lease on the interval.
	FinishRun(ctx context.Context, id string, state RunState) error
	// RenewRunLease extends the run's lease on its interval to now+lease.
	// ErrLeaseLost when the run does not hold it any more (another run took
	// it over after it expired, or the run finished).
	RenewRunLease(ctx context.Context, id string, lease time.Duration) error
	// RunLeases returns the leases that the pipeline's running runs hold
	// on their intervals, ordered by interval, each judged live or expired
	// on the store's clock as CreateRun judges it: what a scheduler needs
	// to skip an interval that is being run and to name who runs it. A
	// running run without a lease (one handed to workers) has none here.
	RunLeases(ctx context.Context, pipeline string) ([]RunLease, error)
	// CancelRun ends a running run as cancelled (pipec cancel): recorded
	// as failed with the cancellation ("by WHO: REASON") and a
	// "run.cancelled" event, its lease on the interval released and, for a
	// run handed to workers, its tasks not started yet marked not run and
	// its claims taken away (their workers stop them at their next
	// heartbeat). A local run learns it when renewing its lease. Cancelling
	// a run that ended is ErrConflict.
	CancelRun(ctx context.Context, id, reason, by string) (Run, error)
	// AbandonRun is for a run whose pipec died (a rerun finds it still
	// running): its queued and running attempts become unknown, whatever
	// their leases say, and the run failed, with reason recorded in a
	// "run.abandoned" event. It returns the attempts it marked. Their
	// processes may still be alive; the rerun's higher tokens fence them.
	AbandonRun(ctx context.Context, id, reason string) ([]Attempt, error)

	// NextToken grants the next fencing token of resource: strictly greater
	// than every token granted before for it, across runs, processes and
	// restarts, power loss included (see the package doc's epochs).
	NextToken(ctx context.Context, resource string) (int64, error)
	// StartAttempt allocates the task's next attempt number in the run and a
	// token from spec.Resource (as NextToken) in one transaction, and records the
	// attempt (running with a lease from now, or queued).
	StartAttempt(ctx context.Context, spec AttemptSpec) (Attempt, error)
	// TakeRetry counts one retry against run's retry budget if the budget
	// allows it: allowed says how many retries it allows once first of the
	// run's tasks have an attempt in the run (retry.Budget.Allowed). The
	// count is kept with the run, whoever takes it (a local run, the
	// visits of every worker and dispatcher), so concurrent takers never
	// exceed it. ErrNotFound when the run does not exist.
	TakeRetry(ctx context.Context, run string, allowed func(first int) int) (RetryCount, error)
	// MarkRunning moves a queued attempt to running, records its pid and starts
	// its lease (0: none). On a running attempt it only updates pid and lease.
	MarkRunning(ctx context.Context, ref AttemptRef, pid int, lease time.Duration) (Attempt, error)
	// MarkRunningAs is MarkRunning with the whole process identity (see
	// Running); with Running.Durable the write is on stable storage before
	// it returns.
	MarkRunningAs(ctx context.Context, ref AttemptRef, r Running) (Attempt, error)
	// ResolveAttempt settles an unknown attempt as succeeded or failed by a
	// person's word (pipec resolve), recording who and why in an
	// "attempt.resolved" event. Any other state is ErrConflict.
	ResolveAttempt(ctx context.Context, ref AttemptRef, as AttemptState, reason, by string) (Attempt, error)
	// RenewLease extends a running attempt's lease to now+lease. It fails with
	// ErrLeaseLost when the attempt is not running any more or token is not its
	// token: an unknown attempt is never revived.
	RenewLease(ctx context.Context, ref AttemptRef, token int64, lease time.Duration) error
	// MarkUnknown turns every running attempt whose lease expired (expiry <=
	// now on the store's clock) into unknown, records an event for each and
	// returns them.
	MarkUnknown(ctx context.Context) ([]Attempt, error)
	// FinishAttempt records how an attempt ended. Repeating the same outcome is
	// a no-op; a different outcome for a finished attempt is ErrConflict. An
	// unknown attempt may still finish (its process came back).
	FinishAttempt(ctx context.Context, ref AttemptRef, o Outcome) error
	// GetAttempt returns one attempt or ErrNotFound.
	GetAttempt(ctx context.Context, ref AttemptRef) (Attempt, error)
	// Attempts returns a run's attempts ordered by task, then number.
	Attempts(ctx context.Context, run string) ([]Attempt, error)
	// TaskAttempts returns one task's attempts in every run that drew
	// tokens from resource (its pipeline's interval, AttemptSpec.Resource),
	// ordered by token: what a task's visit reads to learn whether the task
	// ran before (reuse, orphans, an unknown effect) without reading the
	// run's other tasks.
	TaskAttempts(ctx context.Context, resource, task string) ([]Attempt, error)

	// RecordVersion records a staged version produced by an attempt; Run, Task
	// and Attempt must name an existing attempt, whose token and the run's
	// code_version are copied into the version. Recording the same (artifact,
	// interval, digest) for the same attempt again returns the existing record.
	RecordVersion(ctx context.Context, v Version) (Version, error)
	// AcceptVersion marks a staged version accepted (its checks passed).
	// Accepting an accepted version is a no-op; a rejected one is ErrConflict.
	AcceptVersion(ctx context.Context, id int64) error
	// RejectVersion marks a staged version rejected with a reason.
	RejectVersion(ctx context.Context, id int64, reason string) error
	// ReopenVersion moves a rejected version back to staged, for reason,
	// to be audited again: a check of its artifact is new or edited since
	// it rejected the output of a task that is not idempotent, which is not
	// run again to make another. Reopening a staged version is a no-op; an
	// accepted one is ErrConflict.
	ReopenVersion(ctx context.Context, id int64, reason string) error
	// GetVersion returns one version or ErrNotFound.
	GetVersion(ctx context.Context, id int64) (Version, error)
	// AttemptVersion returns the version attempt ref recorded of artifact
	// in interval, in any state (the newest, if it recorded several), or
	// ErrNotFound: what a later visit of a non-idempotent task audits when
	// the attempt's staging folder is on another machine.
	AttemptVersion(ctx context.Context, ref AttemptRef, artifact, interval string) (Version, error)
	// AcceptedVersion returns the pipeline's accepted version of artifact for
	// interval that carries the highest token (the newest attempt's, when all
	// draw from FenceResource), or ErrNotFound. A version of another interval
	// or another pipeline never qualifies.
	AcceptedVersion(ctx context.Context, pipeline, artifact, interval string) (Version, error)

	// CompareAndSwapPointer points (pipeline, sink, artifact, interval) at
	// s.Version as fence.Decide says: Won when s.Token is greater than the
	// pointer's token, Idempotent when the pointer already holds s.Version
	// with s.Token, else Fenced, changing nothing and recording a
	// "publish.fenced" event. A fenced swap is also Fenced when an attempt of
	// the task that produced s.Version, in the same fenced resource, was
	// granted a higher token (fence.FencedAtGrant; CASResult.GrantedToken).
	// With s.Expect set, a pointer that moved since is Conflict.
	// s.Version must be accepted, of the same pipeline, artifact and
	// interval, and carry s.Token (ErrConflict otherwise). Durable: on
	// stable storage before it returns.
	CompareAndSwapPointer(ctx context.Context, s Swap) (CASResult, error)
	// Pointer returns the current pointer or ErrNotFound.
	Pointer(ctx context.Context, pipeline, sink, artifact, interval string) (Pointer, error)
	// Pointers returns every pointer of a pipeline's sink, ordered by
	// artifact, interval.
	Pointers(ctx context.Context, pipeline, sink string) ([]Pointer, error)
	// PointersGeneration is how many Won swaps of a pipeline's sink's
	// pointers the store has recorded (0: none). Each Won swap takes the
	// next generation, in the order the swaps commit, so a reader that saw
	// every pointer of the sink after reading generation g knows, reading g
	// again, that none of them moved since: one row read where Pointers
	// reads every interval the sink holds.
	PointersGeneration(ctx context.Context, pipeline, sink string) (int64, error)
	// PointedVersions returns the versions that the pointers of a
	// pipeline's sink name, by id: what a GetVersion of each pointer's
	// version reads, in one read, for a caller that judges every pointer
	// (a sink's reconcile at each run's start, which a backfill pays once
	// per interval for every interval held). A pointer swapped after it
	// may name a version missing here.
	PointedVersions(ctx context.Context, pipeline, sink string) (map[int64]Version, error)

	// StateID is the store's identity: random, made when the store was
	// created, never changed. A sink is bound to the state that publishes
	// to it by this id.
	StateID(ctx context.Context) (string, error)
	// RaiseTokens makes every later grant of each resource greater than
	// floor (a sink adopted from another state has seen tokens up to
	// floor), durably, and records a "tokens.raised" event with reason.
	RaiseTokens(ctx context.Context, resources []string, floor int64, reason string) error

	// HoldCollection records holder's hold on the state's artifact versions
	// (Collection) until lease from now on the store's clock, or renews
	// it. Durable: on stable storage before it returns, so no crash of the
	// store's server takes back a hold its gc goes on relying on.
	HoldCollection(ctx context.Context, holder string, lease time.Duration) error
	// EndCollection releases holder's hold; none held is no error.
	EndCollection(ctx context.Context, holder string) error
	// Collecting returns the live hold that lasts longest, and false when
	// none is live.
	Collecting(ctx context.Context) (Collection, bool, error)

	// AppendEvent appends an event (Seq and Time are set by the store) and
	// returns its sequence number.
	AppendEvent(ctx context.Context, e Event) (int64, error)
	// Events returns a run's events in sequence order.
	Events(ctx context.Context, run string) ([]Event, error)

	// Close releases the store's connections.
	Close() error
}

// EventTailer is an optional capability of a Store: reading a run's log
// from a sequence number on, so a reader following it (pipec run --json,
// pipec ui) pays for what it has not seen yet only. A Store without it is
// read whole (Events) and filtered.
type EventTailer interface {
	// EventsAfter returns the run's events with a sequence number above
	// seq, in sequence order.
	EventsAfter(ctx context.Context, run string, seq int64) ([]Event, error)
}

// EventsAfter is run's events with a sequence number above seq, in
// sequence order: through st's EventTailer when it has one, else its
// whole log read and cut.
func EventsAfter(ctx context.Context, st Store, run string, seq int64) ([]Event, error) {
	if t, ok := st.(EventTailer); ok {
		return t.EventsAfter(ctx, run, seq)
	}
	evs, err := st.Events(ctx, run)
	if err != nil {
		return nil, err
	}
	i := 0
	for i < len(evs) && evs[i].Seq <= seq {
		i++
	}
	return evs[i:], nil
}

// VersionsByID indexes vs by id.
func VersionsByID(vs []Version) map[int64]Version {
	m := make(map[int64]Version, len(vs))
	for _, v := range vs {
		m[v.ID] = v
	}
	return m
}

// TaskDigestsText is Run.TaskDigests as a store keeps it: a JSON object
// (keys sorted), "" for none.
func TaskDigestsText(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "", nil
	}
	b, err := json.Marshal(m)
	return string(b), err
}

// ParseTaskDigests reads TaskDigestsText's text back; "" is nil.
func ParseTaskDigests(text string) (map[string]string, error) {
	if text == "" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		return nil, fmt.Errorf("task digests: %w", err)
	}
	return m, nil
}
