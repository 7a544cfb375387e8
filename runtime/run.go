// Package runtime runs one interval of a compiled plan on this machine: tasks
// in dependency order as child processes, each attempt with a fencing token
// from the store, retries by error class, leases for tasks that heartbeat,
// write-audit-publish of their outputs, and resume of an interrupted run.
//
// Every state change goes to the store (package store) before anything depends
// on it, so a kill -9 of pipec at any point leaves a state a rerun can resume
// from: accepted artifacts are reused, tasks that succeeded are not run again,
// and attempts of the crashed run, which the rerun cannot see, are fenced by the
// higher tokens of its own attempts.
//
// # What a task gets
//
// A task's command runs without a shell, in the spec file's folder, in its own
// process group (a timeout kills the whole group: SIGTERM, then SIGKILL). Its
// environment is PATH, HOME, USER, LOGNAME, SHELL, TMPDIR, TZ, LANG, LANGUAGE,
// TERM and LC_* from pipec's own, the task's env, the secret_env names it
// declares (their values are masked as *** in logs, tails and events), and:
//
//	PIPEC_RUN_ID            orders/2024-01-01/r1
//	PIPEC_TASK              the task's name
//	PIPEC_ATTEMPT           1, 2, ... within the run
//	PIPEC_TOKEN             the attempt's fencing token
//	PIPEC_STATE_ID          the state's identity (with PIPEC_RUN_ID and
//	                        PIPEC_TOKEN, what marks the attempt's processes)
//	PIPEC_INTERVAL_START    2024-01-01T00:00:00Z (RFC 3339)
//	PIPEC_INTERVAL_END      2024-01-02T00:00:00Z
//	PIPEC_INTERVAL          2024-01-01 (the interval's key in sinks and run ids)
//	PIPEC_CODE_VERSION      the spec's code_version
//	PIPEC_STATE             the state database (for pipec heartbeat)
//	PIPEC_OUTPUT_<artifact> a fresh, empty staging directory per output; write
//	                        the data there (e.g. <artifact>.csv), nowhere else
//	PIPEC_INPUT_<artifact>  the directory of the accepted version of an input
//	                        for this run's interval, in the pipeline's artifact
//	                        store (package artifacts); read only
//	PIPEC_INPUT_<artifact>_PREV (_PREV<n>, _NEXT<n>)
//	                        an input at an offset ("raw@-1"); also set as
//	                        PIPEC_INPUT_<artifact> when the task does not read
//	                        that artifact of its own interval. Unset when the
//	                        interval is before the schedule's start.
//	PIPEC_HEARTBEAT         (tasks with a heartbeat block) a file to touch at
//	                        least every heartbeat period; see lease.go
//	PIPEC_HEARTBEAT_EVERY   the heartbeat period in seconds
//
// A task whose inputs have no accepted version for their interval is not
// started; the reason is recorded. Output (stdout and stderr together) goes
// to .pipec/logs/<run>/<task>/<attempt>.log beside the state database, created
// when the attempt first prints, and its tail to the store.
package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/internal/goreuse"
	"github.com/pipec/pipec/runtime/artifacts"
	"github.com/pipec/pipec/runtime/exec"
	"github.com/pipec/pipec/runtime/objstore"
	"github.com/pipec/pipec/runtime/retry"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
)

// Defaults for Options fields left zero.
const (
	// DefaultLease is the lease of a task without a heartbeat block; the
	// runtime renews it while the task's process lives, so it only expires
	// when pipec itself is gone.
	DefaultLease = 30 * time.Second
	// DefaultZombieGrace is how long a run waits, once its tasks are done,
	// for attempts whose lease expired and were relaunched, before killing
	// them.
	DefaultZombieGrace = 30 * time.Second
	// DefaultRunLease is a run's lease on its interval. A second run of the
	// interval is refused while it is live; once pipec is gone it expires
	// and the next run takes the interval over.
	DefaultRunLease = 15 * time.Second
)

// Options configure one run.
type Options struct {
	Plan *compiler.Plan
	// BaseDir is the folder of the spec (or plan) file: tasks run there and
	// relative sink paths are resolved against it.
	BaseDir string
	// Interval is the interval's start: "2024-01-01" or an RFC 3339 time.
	Interval string
	Store    store.Store
	// ObjectStores builds the clients of the run's object stores (S3 sinks
	// and artifacts). A worker passes one for all its visits, so credentials
	// are resolved once; nil gives each run its own.
	ObjectStores *objstore.Clients
	// SinksShown is what earlier runs of this process saw the directory
	// sinks' links show (sink.Shown): a run's start then reads again only
	// the links whose pointer changed. A backfill passes one for all its
	// runs; nil: each run's start reads every link.
	SinksShown *sink.Shown
	// Goroutines keeps the goroutines the run's tasks and their starts'
	// markers run on, their stacks grown already (internal/goreuse). A
	// backfill passes one for all its runs and a worker one for all its
	// visits, as each run or visit would otherwise grow new stacks; nil: the
	// run's own, ended with it.
	Goroutines *goreuse.Pool
	// Setup, when set, is PreparePlan of these options (but for the
	// interval), made once for the runs or visits of one plan: a worker's
	// visits, a backfill's runs. One that does not fit them is not used.
	Setup *PlanSetup
	// StatePath is the store's database file; tasks get it as PIPEC_STATE.
	// Logs, staging directories and heartbeat files live in its
	// store.ScratchDir unless Scratch names another folder.
	StatePath string
	// Scratch, if set, is the folder for this process's logs, staging and
	// heartbeat files (a worker's --workdir) instead of the state's
	// ScratchDir.
	Scratch string
	// ServerState, for a store on a database server, is its URL without
	// the password (store.Location.String): tasks get it as PIPEC_STATE
	// instead of StatePath, and `pipec heartbeat` then renews through the
	// heartbeat file (see lease.go), never with the database's credentials.
	ServerState string
	// Seed seeds the retry jitter.
	Seed uint64
	// Force reruns every task, even those a previous run of the interval
	// completed: nothing is reused or adopted from an earlier run (an
	// unknown attempt still blocks its task until it is resolved). A run
	// records it (store.Run.Forced), and its dispatcher gives it to every
	// visit of the run's tasks; a visit still adopts what an earlier visit
	// of the same run did.
	Force bool
	// Parallel bounds the tasks running at once (GOMAXPROCS when 0).
	Parallel int
	// Environ is pipec's own environment ("KEY=value"); tasks get a filtered
	// part of it (see exec.BaseEnv) and the secret_env names they declare.
	Environ []string
	// Slots, if set, are shared with other runs (a backfill): the pools'
	// slots and the parallelism then bound all of them together. Nil: this
	// run has its own (Parallel, and each pool's slots).
	Slots *Slots
	// OnEvent, if set, is called for every state change, in order.
	OnEvent func(Event)
	// Worker names this runtime in attempts (host:pid when empty).
	Worker string
	// Self is this machine as attempts record it, where a later run or
	// visit looks for their orphans (exec.Self when zero).
	Self exec.Identity
	// Wait makes a run whose interval another live run holds wait for it
	// to end (or for its lease to expire) instead of failing at once with
	// a *store.RunBusyError. OnWait, if set, is told once per holder.
	Wait   bool
	OnWait func(*store.RunBusyError)
	// MaxActiveRuns, when positive, is passed to the store as
	// NewRun.MaxActive: the run is refused (a *store.RunSlotsError) while
	// the pipeline has that many runs in progress, in this process or any
	// other; with Wait it waits for a slot instead, and OnWaitSlot, if
	// set, is told each time the runs holding the slots change.
	MaxActiveRuns int
	OnWaitSlot    func(*store.RunSlotsError)
	// RunLease is the lease the run holds on (pipeline, interval), renewed
	// a third of it apart while the run lives; 0 means DefaultRunLease.
	RunLease time.Duration
	// OnStateSilent, if set, is told when a renewal of the run's lease has
	// waited a third of the lease for the state (silent: a server that
	// stopped answering, or restarts; a file another process holds
	// locked), and again, not silent, once that renewal returned, with its
	// error (nil: the state answered). The run waits for its state
	// meanwhile; without a word it looks hung.
	OnStateSilent func(silent bool, err error)

	// Artifacts is the folder of the pipeline's shared artifact store
	// (--artifacts); it wins over the plan's artifacts field. With neither,
	// versions are kept beside the state (StatePath's folder, versions/);
	// a worker's visit then refuses the tasks whose versions another worker
	// may have to read (see RunVisit).
	Artifacts string
	// DefaultArtifacts, if set, is the store when neither Artifacts nor the
	// plan names one, in place of versions/ beside the state, and is shared
	// by whoever uses this state: workers sharing an SQLite file on one
	// machine give versions/ beside that file.
	DefaultArtifacts string

	// LogLimit caps each attempt's log file (exec.DefaultLogLimit, 64 MiB,
	// when 0); past it the output is dropped and a marker line says so.
	LogLimit int64

	// DefaultLease, LeasePoll, KillGrace and ZombieGrace tune timing; zero
	// means the default. LeasePoll is how often expired leases are looked for
	// (a fifth of the shortest lease, between 20ms and 1s).
	DefaultLease time.Duration
	LeasePoll    time.Duration
	KillGrace    time.Duration
	ZombieGrace  time.Duration

	// RecordWithin bounds the state's answers once the run is stopped (its
	// context ended: Ctrl-C, a lost lease, a worker's shutdown), past the
	// kill grace: what the run records then (the ends of the tasks it
	// stopped, its own end) is given up after it, and the run returns
	// saying so (DefaultRecordWithin when 0).
	RecordWithin time.Duration

	// AfterExit, if set, is called with the run's context and a task's
	// name as each attempt's process has exited, before its end and its
	// outputs are recorded: a test's hook (a worker's, in its tests' own
	// build) that stops a real process exactly there. Nil otherwise.
	AfterExit func(ctx context.Context, task string)
}

// Event is one state change, as OnEvent receives it: the runtime's progress
// feed, for people. Kinds are the store's (attempt.started, publish.fenced,
// ...) and the runtime's own (task.*, check.*, attempt.retry); data keys mean
// what they mean in the log (version is an id, label its name). The JSON a
// program reads (`pipec run --json`, `pipec events --json`) is the store's
// log itself, documented in schema/events.schema.json.
type Event struct {
	Time    time.Time      `json:"time"`
	Run     string         `json:"run"`
	Kind    string         `json:"kind"`
	Task    string         `json:"task,omitempty"`
	Attempt int            `json:"attempt,omitempty"`
	Data    map[string]any `json:"data,omitempty"`
}

// Runtime event kinds, recorded in the store's event log beside the store's own.
const (
	EventTaskReused     = "task.reused"
	EventTaskOutdated   = "task.outdated"
	EventTaskNotRun     = "task.not_run"
	EventTaskSucceeded  = "task.succeeded"
	EventTaskFailed     = "task.failed"
	EventAttemptRetry   = "attempt.retry"
	EventAttemptLease   = "attempt.relaunch"
	EventCheckPassed    = "check.passed"
	EventCheckFailed    = "check.failed"
	EventPublishFailed  = "publish.failed"
	EventRunSuperseded  = "run.superseded"
	EventSinkReconciled = "sink.reconciled"
	EventZombieKilled   = "attempt.abandoned"
	EventOutputRejected = "output.rejected"
	EventOutputLeft     = store.EventOutputLeft
)

// Task states in a summary.
const (
	TaskSucceeded = "succeeded"
	TaskFailed    = "failed"
	TaskNotRun    = "not_run"
	TaskReused    = "reused"
	taskPending   = "pending"
	taskRunning   = "running"
)

// Run executes one interval of the plan and returns its summary. The error is
// for a run that could not be carried out at all (bad interval, unusable
// store); task failures are in the summary (Summary.Failed).
func Run(ctx context.Context, o Options) (*Summary, error) {
	if o.Plan == nil || o.Store == nil {
		return nil, errors.New("runtime: a plan and a store are required")
	}
	iv, err := ResolveInterval(o.Plan.Schedule, o.Interval)
	if err != nil {
		return nil, err
	}
	r, err := newRunner(o, iv, "", o.Setup)
	if err != nil {
		return nil, err
	}
	defer r.endGoroutines()
	return r.run(ctx)
}

// runner is the state of one run.
type runner struct {
	o        Options
	plan     *compiler.Plan
	iv       Interval
	st       store.Store
	stateDir string
	// arts is the pipeline's artifact store, where accepted versions are
	// put and inputs and publishes read from; artsLocal: nothing configured
	// it, it is versions/ beside the state (openArtifacts).
	arts      artifacts.Store
	artsLocal bool
	// owned guards the asking of ownArtifacts; ownAsked: its answer,
	// ownErr, is final (the store keeps the versions for this state, or
	// for another).
	owned    sync.Mutex
	ownAsked bool
	ownErr   error

	resource string
	rand     *retry.Rand
	budget   *retry.Budget
	classes  *retry.Classifier

	// baseEnv is what every task gets of pipec's environment, rendered
	// (exec.Env.List); parentEnv is all of it, where secret_env names are
	// looked up.
	baseEnv   []string
	parentEnv exec.Env
	// red masks the values of every secret_env name of the plan wherever
	// the run writes or prints (see redact.go).
	red *exec.Redactor

	// stateID is the state's identity (store.Store.StateID), read as a
	// run or a visit starts: part of every attempt's marker (markerOf).
	stateID string

	tasks      map[string]*taskState
	checksOf   map[string][]compiler.PlanCheck // the setup's, shared: read only
	pubsOf     map[string][]compiler.PlanPublish
	leasePoll  time.Duration // the setup's, unless Options.LeasePoll is set
	sinks      map[string]sink.Sink
	sinkErr    map[string]string
	sinkPlan   map[string]compiler.PlanSink
	slots      *Slots
	runID      string
	gos        *goreuse.Pool // runs the tasks and their starts' markers: Options.Goroutines, or the runner's own
	evMu       sync.Mutex
	leases     *leaseWatch
	zombies    sync.WaitGroup
	zombieMu   sync.Mutex
	zombieList []*zombie
	runCtx     context.Context
	// records is the context of what the run records whatever ended
	// runCtx (startRecords).
	records context.Context
	// loseRun cancels the run because its interval lease was lost.
	loseRun context.CancelCauseFunc
	// self is this machine (host, boot id), recorded with every attempt.
	self exec.Identity
	// paths remembers the PATH searches of the plan's task commands: the
	// setup's, so a worker's visits of one plan share it.
	paths *exec.Paths
	// blocked: non-idempotent tasks whose earlier attempt may have taken
	// effect (not run; see orphans.go). adopt: non-idempotent tasks with a
	// succeeded attempt in an earlier run (not run again).
	blocked map[string]string
	adopt   map[string]store.Attempt
	// hasPrior: an earlier run touched the interval, so a task may be
	// reused (reusable); a first run asks nothing. digests and defined:
	// the setup's task digests of this plan and of the earlier runs
	// reusable asked of (edited).
	hasPrior bool
	digests  map[string]string
	defined  *runDefinitions

	// A visit (visit.go): the attempts made before it, for the retry
	// policy, and whether an attempt's lease expired (which stops the task
	// instead of relaunching it: the task is another worker's).
	visitBase int
	leaseLost atomic.Bool
	// held is Visit.Held (nil: the dispatcher fences its visits itself).
	held func(context.Context) error
	// ends is a visit's attempt end left to the worker (visit.go); nil in
	// a local run, which is how the engine tells the two apart (visiting).
	ends *visitEnds
	// sched is a local run's scheduler, which a task's end asks what it
	// lets start (handoff.go); nil in a visit.
	sched *dag

	mu     sync.Mutex // guards summary parts below and taskState fields
	checks map[string]*CheckResult
	// acceptedBy holds the checks that accepted each version audited in
	// this run (by version id), for its lineage manifest.
	acceptedBy map[int64][]sink.ManifestCheck
	// storeErr is the first failure of the state database (storeFailed).
	storeErr string
	// storeSeen: a failure of the state database was noted (noteStore);
	// storeHard: one of them was neither of the state's reach
	// (store.ErrUnreachable) nor a loss of what it had recorded, but a
	// refusal of what was asked.
	storeSeen, storeHard bool
	// attemptRecorded: an attempt of this runner's was recorded (its
	// start, or a claim's); a record the state no longer finds after
	// that is one it lost.
	attemptRecorded bool
	// artsErr is the first output that could not be put into the
	// artifact store, or input that could not be read from it; diskErr,
	// the first output that could not be frozen on this machine.
	artsErr, diskErr string
	// rejected says, by artifact, why this run's version of it was not
	// accepted (a check failed, it could not be frozen or stored): the
	// reason its readers in this run are not run. unreadable holds, by
	// artifact, the summary's line for an output that could not be frozen
	// into a version (a link or a device in its folder).
	rejected   map[string]string
	unreadable map[string]string
	// inputsSeen is what this process first saw of each input folder
	// (seeInput), inputsRead who reads each now (readInputs), and
	// inputsChanged which task found it changed first (suspects), by path.
	inputsSeen    map[string]folderState
	inputsRead    reading
	inputsChanged map[string]string
	publishes     []PublishResult
	fenced        []FencedPublish
}

type taskState struct {
	t     *compiler.PlanTask
	state string
	res   TaskResult
	// handed is the attempt started for it by the end of the task it
	// waited for (handoff.go), until its first attempt takes it.
	handed *handed
	// final: its failure would be the same on every worker (the run's
	// retry budget was spent, or the artifact store keeps the pipeline's
	// versions for another state); a visit's task does not fail over then.
	final bool
}

// statePlace names the state where others record it for a person to
// find (a sink's binding, an artifact store's owner, a scratch folder's
// record): its server's URL without the password, or its file.
func (r *runner) statePlace() string { return cmp.Or(r.o.ServerState, r.o.StatePath) }

// endGoroutines ends the runner's kept goroutines when they are its own;
// Options.Goroutines outlives the run, and its owner closes it.
func (r *runner) endGoroutines() {
	if r.o.Goroutines == nil {
		r.gos.Close()
	}
}

// newRunner prepares a run of the plan's tasks, or of the task named only
// (a visit: the other tasks' states would be built and never looked at, and
// a worker builds a runner per task it runs, from plans of thousands).
// newRunner makes the runner of a run (only empty) or of a visit of the
// task only, with setup when it fits o (else derived afresh).
func newRunner(o Options, iv Interval, only string, setup *PlanSetup) (*runner, error) {
	if o.ObjectStores == nil {
		o.ObjectStores = new(objstore.Clients)
	}
	gos := o.Goroutines
	if gos == nil {
		gos = new(goreuse.Pool)
	}
	o.Parallel, _ = Parallel(o.Parallel, "")
	if o.DefaultLease <= 0 {
		o.DefaultLease = DefaultLease
	}
	if o.ZombieGrace <= 0 {
		o.ZombieGrace = DefaultZombieGrace
	}
	if o.RunLease <= 0 {
		o.RunLease = DefaultRunLease
	}
	if o.Worker == "" {
		host, _ := os.Hostname()
		o.Worker = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	var err error
	if !setup.fits(o) {
		if setup, err = PreparePlan(o); err != nil {
			return nil, err
		}
	}
	statePath := setup.statePath
	o.StatePath, o.BaseDir = statePath, setup.baseDir
	p := o.Plan
	r := &runner{
		o: o, plan: p, iv: iv, st: o.Store,
		stateDir:      cmp.Or(o.Scratch, store.ScratchDir(statePath)),
		resource:      p.Pipeline + "@" + iv.Key,
		rand:          retry.NewRand(o.Seed),
		tasks:         map[string]*taskState{},
		checksOf:      setup.checksOf,
		pubsOf:        setup.pubsOf,
		leasePoll:     setup.leasePoll,
		sinks:         map[string]sink.Sink{},
		sinkErr:       map[string]string{},
		sinkPlan:      map[string]compiler.PlanSink{},
		slots:         o.Slots,
		checks:        map[string]*CheckResult{},
		acceptedBy:    map[int64][]sink.ManifestCheck{},
		rejected:      map[string]string{},
		unreadable:    map[string]string{},
		inputsSeen:    map[string]folderState{},
		inputsRead:    reading{},
		inputsChanged: map[string]string{},
		baseEnv:       setup.baseEnv,
		parentEnv:     setup.parentEnv,
		paths:         setup.paths,
		digests:       setup.digests,
		defined:       setup.defined,
		blocked:       map[string]string{},
		adopt:         map[string]store.Attempt{},
		gos:           gos,
	}
	if r.arts, r.artsLocal, err = openArtifacts(o, r.stateDir); err != nil {
		return nil, err
	}
	// Without /proc (not Linux) only the host is known: orphans can then
	// not be found, and are fenced by tokens alone.
	r.self = o.Self
	if r.self.Host == "" {
		r.self, _ = exec.Self()
	}
	if b := p.RetryBudget; b != nil {
		r.budget = &retry.Budget{Ratio: b.Ratio, Min: b.Min}
	}
	var classes []retry.Class
	for _, e := range p.Errors {
		classes = append(classes, retry.Class{Name: e.Name, ExitCodes: e.ExitCodes, Match: e.Match, Deterministic: e.Deterministic})
	}
	r.classes = retry.NewClassifier(classes)
	secrets := slices.Clip(setup.secrets) // shared: appending copies
	// The object store's secret access key (from the environment or the
	// shared files) is masked too; a sink on S3 builds its client now, so
	// that its credentials are known before anything is written.
	for _, s := range p.Sinks {
		if objstore.IsURL(s.Path) {
			_, _ = o.ObjectStores.Get(context.Background())
		}
	}
	secrets = append(secrets, o.ObjectStores.Secrets()...)
	r.red = exec.NewRedactor(secrets)
	r.st = redactingStore{Store: o.Store, red: r.red}
	if r.slots == nil {
		r.slots = NewSlots(p, o.Parallel)
	}
	addTask := func(t *compiler.PlanTask) {
		r.tasks[t.Name] = &taskState{t: t, state: taskPending, res: TaskResult{Name: t.Name, State: taskPending}}
	}
	if only != "" {
		if t := setup.tasks[only]; t != nil {
			addTask(t)
		}
	} else {
		for i := range p.Tasks {
			addTask(&p.Tasks[i])
		}
	}
	for _, c := range p.Checks {
		r.checks[c.Name] = &CheckResult{Name: c.Name, Artifact: c.Input, State: TaskNotRun}
	}
	for _, s := range p.Sinks {
		r.sinkPlan[s.Name] = s
		d, err := sink.Open(sink.Config{Name: s.Name, Type: s.Type, Path: s.Path, Fencing: s.Fencing, BaseDir: o.BaseDir,
			Pipeline: p.Pipeline, Store: r.st, StatePath: r.statePlace(), Lineage: r.lineage,
			ObjectStores: o.ObjectStores, Shown: o.SinksShown,
			Files: func(ctx context.Context, v store.Version) (string, error) {
				return artifacts.Files(ctx, r.arts, v.Location)
			}})
		if err != nil {
			r.sinkErr[s.Name] = err.Error()
			continue
		}
		r.sinks[s.Name] = d
	}
	return r, nil
}

func (r *runner) run(ctx context.Context) (*Summary, error) {
	// Leases that expired while nobody watched (a crashed pipec) become
	// unknown now; their attempts are fenced by this run's higher tokens.
	if _, err := r.st.MarkUnknown(ctx); err != nil {
		return nil, err
	}
	var err error
	if r.stateID, err = r.st.StateID(ctx); err != nil {
		return nil, err
	}
	// Its attempts' folders are this state's alone.
	if err := store.ClaimScratch(r.stateDir, r.stateID, r.statePlace()); err != nil {
		return nil, err
	}
	if r.putsOutputs() {
		// Refused before anything runs: no output could be accepted.
		if err := r.ownArtifacts(ctx); err != nil {
			return nil, err
		}
	}
	if err := r.sinksTake(ctx, nil); err != nil {
		return nil, err
	}
	run, err := r.createRun(ctx)
	if err != nil {
		return nil, err
	}
	// The run's lease on the interval is renewed while this process lives;
	// losing it (pipec was stopped past its lease and another run took the
	// interval over) stops this run: its attempts are fenced anyway.
	ctx, lost := context.WithCancelCause(ctx)
	defer lost(nil)
	defer r.startRecords(ctx)() // after the renewals below stopped
	r.loseRun = lost
	renewDone := make(chan struct{})
	stopRenew := make(chan struct{})
	go func() { defer close(renewDone); r.renewRunLease(ctx, run.ID, stopRenew, lost) }()
	defer func() { close(stopRenew); <-renewDone }()
	r.runCtx = ctx
	r.runID = run.ID
	// The interval is this run's now: what ran of it before is settled.
	prior, err := r.st.ListRuns(ctx, store.RunFilter{Pipeline: r.plan.Pipeline, Interval: r.iv.Key})
	if err != nil {
		_ = r.st.FinishRun(r.records, run.ID, store.RunFailed)
		return nil, err
	}
	prior = slices.DeleteFunc(prior, func(pr store.Run) bool { return pr.ID == run.ID })
	r.emitStore(store.EventRunCreated, "", 0, map[string]any{"interval": r.iv.String(), "code_version": r.plan.CodeVersion,
		"plan_digest": r.plan.Digest})
	r.hasPrior = len(prior) > 0
	if err := r.takeOver(ctx, prior); err != nil {
		// The run cannot go on; say so in the store rather than leave it
		// running for the next run to abandon.
		_ = r.st.FinishRun(r.records, run.ID, store.RunFailed)
		return nil, err
	}
	return r.execute(ctx, run)
}

// createRun creates the run with its lease on the interval; with
// Options.Wait it waits while another live run holds it.
func (r *runner) createRun(ctx context.Context) (store.Run, error) {
	host, _ := os.Hostname()
	told, takeOver := "", ""
	for {
		run, err := r.st.CreateRun(ctx, store.NewRun{Pipeline: r.plan.Pipeline, Interval: r.iv.Key,
			IntervalStart: r.iv.Start, IntervalEnd: r.iv.End, CodeVersion: r.plan.CodeVersion, PlanDigest: r.plan.Digest, TaskDigests: r.digests, Forced: r.o.Force,
			Owner: store.RunOwner{Host: host, PID: os.Getpid()}, Lease: r.o.RunLease, TakeOver: takeOver, MaxActive: r.o.MaxActiveRuns})
		var busy *store.RunBusyError
		var full *store.RunSlotsError
		if errors.As(err, &full) && r.o.Wait {
			// No free run slot: wait for one of the runs holding them to end.
			if d := full.Detail(); d != told {
				told = d
				if r.o.OnWaitSlot != nil {
					r.o.OnWaitSlot(full)
				}
			}
			select {
			case <-ctx.Done():
				return store.Run{}, fmt.Errorf("waiting for a free run slot: %w", ctx.Err())
			case <-time.After(min(max(r.o.RunLease/10, 20*time.Millisecond), 500*time.Millisecond)):
			}
			continue
		}
		if !errors.As(err, &busy) {
			return run, err
		}
		if busy.Owner.Host == host && busy.Run != takeOver && !exec.Alive(busy.Owner.PID) {
			// Its pipec died on this host (kill -9): no need to wait for
			// its lease to run out.
			takeOver = busy.Run
			continue
		}
		if !r.o.Wait {
			return run, err
		}
		if busy.Run != told && r.o.OnWait != nil {
			r.o.OnWait(busy)
		}
		told = busy.Run
		select {
		case <-ctx.Done():
			return store.Run{}, fmt.Errorf("waiting for %s: %w", busy.Run, ctx.Err())
		case <-time.After(min(max(r.o.RunLease/10, 20*time.Millisecond), 500*time.Millisecond)):
		}
	}
}

// renewRunLease renews the run's lease a third of it apart until stop is
// closed; a lost lease cancels the run with the reason.
func (r *runner) renewRunLease(ctx context.Context, id string, stop <-chan struct{}, lost context.CancelCauseFunc) {
	every := max(r.o.RunLease/3, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			err := r.renewWatched(id, every)
			if errors.Is(err, store.ErrLeaseLost) {
				if got, gerr := r.st.GetRun(r.records, id); gerr == nil && got.State == store.RunCancelled {
					lost(fmt.Errorf("run %s was cancelled %s", id, got.Cancelled))
					return
				}
				lost(leaseLost{run: id, interval: r.iv.Key})
				return
			}
		}
	}
}

// renewWatched renews the run's lease, telling Options.OnStateSilent when
// the state has not answered within silentAfter, and when it answered.
func (r *runner) renewWatched(id string, silentAfter time.Duration) error {
	if r.o.OnStateSilent == nil {
		return r.st.RenewRunLease(r.records, id, r.o.RunLease)
	}
	said := make(chan struct{})
	slow := time.AfterFunc(silentAfter, func() {
		defer close(said)
		r.o.OnStateSilent(true, nil)
	})
	err := r.st.RenewRunLease(r.records, id, r.o.RunLease)
	if !slow.Stop() {
		<-said
		r.o.OnStateSilent(false, err)
	}
	return err
}

// takeOver makes the interval this run's: runs of it that never finished are
// abandoned (their attempts fenced by this run's tokens) and sinks are
// reconciled with the store.
func (r *runner) takeOver(ctx context.Context, prior []store.Run) error {
	// No task starts beside a process an earlier run left behind.
	if err := r.settleOrphans(ctx, prior); err != nil {
		return err
	}
	for _, pr := range prior {
		if pr.State == store.RunRunning {
			// A run of this interval that never finished: its pipec crashed
			// (or still runs elsewhere, and is fenced by this run's tokens).
			r.record(ctx, EventRunSuperseded, "", 0, map[string]any{"superseded": pr.ID})
			if _, err := r.st.AbandonRun(ctx, pr.ID, "superseded by "+r.runID+": its pipec stopped before the run finished"); err != nil {
				return err
			}
		}
	}
	if err := r.raiseAboveSinks(ctx); err != nil {
		return err
	}
	// Complete publishes that won in the store but crashed before their link
	// swap (a lost response), so the sink shows what the store says.
	for _, name := range slices.Sorted(mapKeys(r.sinks)) {
		if n, err := r.sinks[name].ReconcileAll(ctx); err != nil {
			r.record(ctx, EventSinkReconciled, "", 0, map[string]any{"sink": name, "error": err.Error()})
		} else if n > 0 {
			r.record(ctx, EventSinkReconciled, "", 0, map[string]any{"sink": name, "links_repaired": n})
		}
	}
	return nil
}

// execute runs the tasks with the lease watch beside them, waits for the
// zombies, and records the run's end.
func (r *runner) execute(ctx context.Context, run store.Run) (*Summary, error) {
	r.leases = newLeaseWatch(r)
	leaseCtx, stopLeases := context.WithCancel(ctx)
	leaseDone := make(chan struct{})
	go func() { r.leases.loop(leaseCtx); close(leaseDone) }()

	r.schedule(ctx)
	r.drainZombies()
	stopLeases()
	<-leaseDone

	sum := r.summary(run)
	state := store.RunSucceeded
	if sum.Failed {
		state = store.RunFailed
	}
	// The run's end is recorded even when ctx was cancelled (Ctrl-C).
	fctx := r.records
	if got, err := r.st.GetRun(fctx, run.ID); err == nil && got.State.Ended() {
		// Ended by someone else: cancelled (pipec cancel), or abandoned
		// by a run that took the interval over. Not a store failure.
		sum.Failed = true
		sum.Run, sum.RunID, sum.State = got, got.ID, string(got.State)
		if got.State != store.RunCancelled {
			sum.Superseded = r.supersededWhy(fctx, run.ID)
		}
		return sum, nil
	}
	if lost := (leaseLost{}); errors.As(context.Cause(ctx), &lost) {
		// Stopped as the run that took the interval over began, before
		// that run recorded this one's end.
		sum.Superseded = fmt.Sprintf("another run took interval %s over", lost.interval)
	}
	if err := r.st.FinishRun(fctx, run.ID, state); err != nil {
		sum.Failed = true
		sum.RunID, sum.State = run.ID, string(store.RunFailed)
		if given := r.recordsGivenUp(); given != nil {
			sum.StoreError, err = given.Error(), given
		} else if sum.StoreError == "" {
			sum.StoreError = StoreFailure("recording the run's end: " + err.Error())
		}
		return sum, fmt.Errorf("run %s: the state database could not record its end: %w", run.ID, err)
	}
	r.emitStore(store.EventRunFinished, "", 0, map[string]any{"state": string(state)})
	if got, err := r.st.GetRun(fctx, run.ID); err == nil {
		sum.Run = got
	}
	sum.RunID, sum.State = sum.Run.ID, string(state)
	return sum, nil
}

// leaseLost is why a run stops once another run took its interval over
// (its lease expired: its pipec was stopped, or cut off from the state).
type leaseLost struct{ run, interval string }

func (e leaseLost) Error() string {
	return fmt.Sprintf("run %s lost its lease on interval %s: another run took it over", e.run, e.interval)
}

// supersededWhy is why run id ended under this process, which did not
// end it nor was it cancelled: the reason the run that took its interval
// over recorded (its pipec was stopped, Ctrl-Z say, or cut off from the
// state past the run's lease). Without it a run whose every task
// succeeded before it saw its lease lost ends FAILED, saying nothing.
func (r *runner) supersededWhy(ctx context.Context, id string) string {
	why := "another run of the interval took it over"
	evs, err := r.st.Events(ctx, id)
	if err != nil {
		return why
	}
	for _, e := range evs {
		var p struct{ Reason string }
		if e.Kind == store.EventRunAbandoned && json.Unmarshal(e.Payload, &p) == nil && p.Reason != "" {
			why = p.Reason
		}
	}
	return why
}

// schedule runs the plan's DAG (dag.go), each task through the task
// engine (runOne).
func (r *runner) schedule(ctx context.Context) {
	r.sched = newDAG(r.plan)
	r.sched.run(engine{
		start: func(name string) {
			ts := r.tasks[name]
			r.mu.Lock()
			ts.state = taskRunning
			r.mu.Unlock()
			r.runOne(ctx, ts)
		},
		spawn:  r.gos.Go,
		notRun: func(name, why string) { r.notRun(ctx, r.tasks[name], why) },
		ended: func(name string) (string, string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			ts := r.tasks[name]
			return ts.state, ts.res.Class
		},
	})
}

func (r *runner) notRun(ctx context.Context, ts *taskState, why string) {
	r.mu.Lock()
	ts.state = TaskNotRun
	ts.res.State = TaskNotRun
	ts.res.Reason = why
	r.mu.Unlock()
	r.record(ctx, EventTaskNotRun, ts.t.Name, 0, map[string]any{"reason": why})
	for _, out := range ts.t.Outputs {
		r.skipChecksAndPublishes(out, fmt.Sprintf("task %s was not run", ts.t.Name))
	}
}

// Slots bound how many task processes run at once: a global limit and one
// per pool of the plan. Waiting for a retry's backoff holds no slot.
type Slots struct {
	global chan struct{}
	pools  map[string]chan struct{}
}

// NewSlots makes the limits of a plan: parallel processes in all (GOMAXPROCS
// when 0), and each pool's slots.
func NewSlots(p *compiler.Plan, parallel int) *Slots {
	parallel, _ = Parallel(parallel, "")
	s := &Slots{global: make(chan struct{}, parallel), pools: map[string]chan struct{}{}}
	for _, pool := range p.Pools {
		if pool.Slots > 0 {
			s.pools[pool.Name] = make(chan struct{}, pool.Slots)
		}
	}
	return s
}

// Parallel is how many tasks run at once for a --parallel (or a worker's
// --slots) of n (0: as many as CPUs), lowered to what the open-file limit
// allows (exec.FileLimitTasks): more would run pipec out of files while it
// starts a task, freezes an output or reads the state, failing what is not
// the task's fault. lowered says so to a person, counting in units ("":
// not lowered).
func Parallel(n int, units string) (tasks int, lowered string) {
	if n <= 0 {
		n = goruntime.GOMAXPROCS(0)
	}
	if fit, limit := exec.FileLimitTasks(); fit > 0 && n > fit {
		return fit, fmt.Sprintf("%d %s, not %d: the open-file limit (ulimit -n) is %d, and each running task holds about %d",
			fit, units, n, limit, exec.FilesPerTask)
	}
	return n, ""
}

// acquire takes a slot of the task's pool, then a global one.
func (r *runner) acquire(ctx context.Context, t *compiler.PlanTask) bool {
	pool := r.slots.pools[t.Pool]
	if pool != nil {
		select {
		case pool <- struct{}{}:
		case <-ctx.Done():
			return false
		}
	}
	select {
	case r.slots.global <- struct{}{}:
		return true
	case <-ctx.Done():
		if pool != nil {
			<-pool
		}
		return false
	}
}

// release gives back what acquire took.
func (r *runner) release(t *compiler.PlanTask) {
	<-r.slots.global
	if pool := r.slots.pools[t.Pool]; pool != nil {
		<-pool
	}
}

func cutKind(id, kind string) (string, bool) {
	prefix := kind + "."
	if len(id) > len(prefix) && id[:len(prefix)] == prefix {
		return id[len(prefix):], true
	}
	return "", false
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// cancelReason says why the run's context ended: the cause it was cancelled
// with (a lost interval lease) or a plain cancellation (Ctrl-C).
func cancelReason(ctx context.Context) string {
	if c := stopCause(ctx); c != "" {
		return "the run was stopped: " + c
	}
	return interrupted
}
