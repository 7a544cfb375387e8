package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/backend"
	"github.com/pipec/pipec/runtime/worker"
	"github.com/pipec/pipec/spec"
)

type workerOptions struct {
	state   stateFlag
	name    string
	slots   int
	workdir string
	lease   time.Duration
	labels  []string
	// labelGiven: --label was on the command line, so no label at all
	// means it was given empty (--label ''), which pflag reads as none.
	labelGiven bool
	artifacts  artifactsFlag
	engine     engineFlag
}

func newWorkerCmd(io IO) *cobra.Command {
	opts := workerOptions{slots: 1}
	cmd := &cobra.Command{
		Use:   "worker --state URL|FILE [--name NAME] [--slots N] [--workdir DIR] [--label L]... [--artifacts DIR]",
		Short: "Claim and run tasks of submitted runs from a shared state",
		Long: "worker registers in the shared state (a postgres:// URL, or an SQLite file that\n" +
			"workers on this machine share; --state or PIPEC_STATE is required), heartbeats, and\n" +
			"claims ready tasks of runs handed over by `pipec submit`, up to --slots at once. Each task\n" +
			"runs as in `pipec run` (in its spec's folder, fenced, audited, published); tasks get\n" +
			"PIPEC_WORKER. Retries stay on this worker; failover follows the task's per_worker and\n" +
			"global limits (docs/design.md section 6).\n\n" +
			"--label offers worker labels (repeatable, or comma-separated: --label spark,gpu): a\n" +
			"task with labels = [...] is claimed only by a worker offering all of them, and fails\n" +
			"over only among such workers.\n\n" +
			"Staging and logs stay in --workdir, on this machine. Accepted versions go into the\n" +
			"pipeline's shared artifact store (--artifacts, else the spec's artifacts field), and\n" +
			"tasks read their inputs from there, whichever worker produced them.\n\n" +
			"SIGTERM or Ctrl-C stops gracefully: no more claims, running tasks are stopped and\n" +
			"handed back without counting against the limits. A worker that stops renewing\n" +
			"(SIGSTOP, SIGKILL) loses its claims after --lease; other workers relaunch them with\n" +
			"higher tokens, and its late publishes are fenced.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if e := opts.engine.get(io); e != "" {
				return delegate(io, cmd, nil, e, true)
			}
			opts.labelGiven = cmd.Flags().Changed("label")
			return runWorker(cmd.Context(), io, opts)
		},
	}
	f := cmd.Flags()
	opts.state.registerHelp(cmd, stateShared)
	f.StringVar(&opts.name, "name", "", "the worker's name (default: PIPEC_WORKER, else host-pid)")
	f.IntVar(&opts.slots, "slots", opts.slots, "tasks this worker runs at once")
	f.StringVar(&opts.workdir, "workdir", "", "local scratch for logs and staging (default: a folder under the system's temp folder)")
	f.DurationVar(&opts.lease, "lease", worker.DefaultLease, "how long the worker's claims live without a heartbeat")
	f.StringSliceVar(&opts.labels, "label", nil, "a label this worker offers (repeatable, or comma-separated); tasks requiring labels run only on workers offering them all")
	opts.artifacts.register(cmd, "the shared artifact store's folder as this machine mounts it (wins over the spec's artifacts "+
		"and submit's --artifacts); without any, tasks whose versions another worker reads are refused")
	opts.engine.register(cmd)
	return cmd
}

// openQueue opens a shared state that workers can use: a PostgreSQL
// database (workers on any machine) or an SQLite file (workers on this
// machine, refused on a network filesystem). pipec worker and pipec workers
// (spec "") have no default state: without --state or PIPEC_STATE they are
// refused, naming the flag, since a worker polling a state nobody submits
// to would wait forever without a word. pipec submit defaults to the state
// beside the spec, as pipec run does.
//
// Its writes fail at once while the server refuses connections: a worker's
// loop rides outages, each call bounded by its lease, and submit --wait
// says the state does not answer and follows on. A server down at the
// start is waited for, for up to limit (0: until ctx ends, a worker's
// wait; who names the worker in what is said).
func openQueue(ctx context.Context, io IO, sf *stateFlag, spec, who string, limit time.Duration) (store.Store, queue.Queue, store.Location, error) {
	if spec == "" && !sf.given(io) {
		return nil, nil, store.Location{}, usageErr("%s: give the shared state with --state (the path of an SQLite file, "+
			"for workers on this machine, or a postgres:// URL) or set %s", sf.cmd.Name(), stateEnv)
	}
	loc, err := sf.location(io, spec)
	if err != nil {
		return nil, nil, loc, err
	}
	st, err := openStateWith(ctx, io, loc, false, backend.Options{}, who, limit)
	if err != nil {
		return nil, nil, loc, err
	}
	if err := backend.CheckShared(loc); err != nil {
		st.Close()
		return nil, nil, loc, usageErr("%v", err)
	}
	return st, st, loc, nil
}

// given reports whether the command was given a state (--state or
// PIPEC_STATE) rather than left to the default.
func (s *stateFlag) given(io IO) bool {
	if s.cmd != nil && s.cmd.Flags().Changed("state") && s.value != "" {
		return true
	}
	return io.Getenv != nil && io.Getenv(stateEnv) != ""
}

func runWorker(ctx context.Context, io IO, opts workerOptions) error {
	if opts.slots < 1 || opts.slots > 1024 {
		return usageErr("worker: --slots must be between 1 and 1024, not %d", opts.slots)
	}
	if opts.lease < 100*time.Millisecond {
		return usageErr("worker: --lease must be at least 100ms, not %s", opts.lease)
	}
	if n, lowered := runtime.Parallel(opts.slots, "slot(s)"); lowered != "" {
		fmt.Fprintf(io.Stderr, "pipec worker: %s\n", lowered)
		opts.slots = n
	}
	if opts.labelGiven && len(opts.labels) == 0 {
		return usageErr("worker: --label: %s", spec.LabelError(""))
	}
	for _, l := range opts.labels {
		if !spec.ValidLabel(l) {
			return usageErr("worker: --label: %s", spec.LabelError(l))
		}
	}
	if io.Procs != nil {
		// A visit's own work (store round trips, process start, freezing
		// outputs) is sequential: with one slot, a second thread bought
		// nothing and cost 7–9% of the workers' CPU in hand-offs
		// (docs/performance.md).
		io.Procs(opts.slots)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	// Closed pipes are handled by cmd/pipec (it watches SIGPIPE); ignoring
	// SIGPIPE here would pass SIG_IGN on to every task the worker starts.
	host, _ := os.Hostname()
	name := opts.name
	if name == "" && io.Getenv != nil {
		name = io.Getenv("PIPEC_WORKER")
	}
	if name == "" {
		name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if !validWorkerName(name) {
		return usageErr("worker: invalid worker name %q: use a letter or digit followed by letters, digits, '_', '.' or '-' "+
			"(at most 128 characters; from --name, else PIPEC_WORKER, else host-pid)", name)
	}
	workdir := opts.workdir
	if workdir == "" {
		workdir = filepath.Join(os.TempDir(), "pipec-worker-"+name)
	}
	if err := os.MkdirAll(workdir, 0o700); err != nil {
		return usageErr("worker: --workdir: %v", err)
	}
	arts, err := opts.artifacts.path()
	if err != nil {
		return err
	}
	if arts != "" && !strings.Contains(arts, "://") {
		// A shared folder that is not there is a share not mounted: putting
		// versions into a fresh local folder of that name would hide them
		// from every other worker.
		if fi, err := os.Stat(arts); err != nil || !fi.IsDir() {
			return usageErr("worker: --artifacts %s is not a folder on this machine (is the share mounted?)", arts)
		}
	}
	st, q, loc, err := openQueue(ctx, io, &opts.state, "", "worker "+name+": ", 0)
	if err != nil {
		return err
	}
	closeState := true
	defer func() {
		if closeState {
			st.Close()
		}
	}()
	// Tasks get the shared state as PIPEC_STATE: a server's URL without
	// its password (their pipec heartbeat renews through the heartbeat
	// file), or the SQLite file's absolute path, in which their pipec
	// heartbeat renews as under pipec run (the worker's own StatePath is
	// its workdir, where logs and staging go).
	taskState := serverState(loc)
	// Workers sharing an SQLite file are on its machine: versions/ beside
	// it is a store they all see (and where pipec run on that state keeps
	// its versions). A database server is no such place.
	shared := ""
	if !loc.Server {
		if taskState, err = filepath.Abs(loc.Path); err != nil {
			return usageErr("worker: --state: %v", err)
		}
		shared = filepath.Join(store.ScratchDir(taskState), "versions")
	}
	if arts == "" && shared == "" {
		fmt.Fprintf(io.Stderr, "pipec: worker %s: no --artifacts: tasks whose versions other tasks read run only when "+
			"their spec (or pipec submit --artifacts) names a shared artifact store; others are refused\n", name)
	}
	err = worker.Run(ctx, worker.Config{
		Artifacts:        arts,
		DefaultArtifacts: shared,
		ServerState:      taskState,
		Info:             queue.WorkerInfo{Name: name, Host: host, PID: os.Getpid(), Slots: opts.slots, Labels: queue.NormalLabels(opts.labels)},
		Store:            st,
		Queue:            q,
		Workdir:          workdir,
		Environ:          io.Environ(),
		Lease:            opts.lease,
		Log:              io.Stderr,
	})
	if errors.Is(err, queue.ErrNotHandedBack) {
		closeState = false // its connections may wait on the silent server
	}
	if err != nil {
		return &exitError{Code: ExitFindings, Err: err}
	}
	return nil
}

type workersOptions struct {
	state stateFlag
	all   bool
}

// goneFor is how long a worker that is not live stays in pipec workers
// without --all.
const goneFor = time.Hour

func newWorkersCmd(io IO) *cobra.Command {
	var opts workersOptions
	cmd := &cobra.Command{
		Use:   "workers --state URL|FILE",
		Short: "List the workers of a shared state",
		Long: "workers lists every worker that registered in the shared state: name, host, pid,\n" +
			"slots, labels, state (live, stopping, stopped, or lost when its heartbeat lapsed), the tasks\n" +
			"it runs, when it was last seen, and its failover counts per task of unfinished runs.\n" +
			"Workers not live and last seen more than an hour ago are left out unless --all.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWorkers(cmd.Context(), io, opts)
		},
	}
	opts.state.registerHelp(cmd, stateShared)
	cmd.Flags().BoolVar(&opts.all, "all", false, "also list workers gone for more than an hour")
	return cmd
}

func runWorkers(ctx context.Context, io IO, opts workersOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	st, q, _, err := openQueue(ctx, io, &opts.state, "", "", stateRestartWait)
	if err != nil {
		return err
	}
	defer st.Close()
	ws, err := q.Workers(ctx)
	if err != nil {
		return &exitError{Code: ExitFindings, Err: err}
	}
	if len(ws) == 0 {
		fmt.Fprintln(io.Stdout, "no workers registered")
		return nil
	}
	hidden := 0
	for _, w := range ws {
		if !opts.all && !w.Live && w.Ago > goneFor {
			hidden++
			continue
		}
		state := w.State
		if state == queue.WorkerLive && !w.Live {
			state = "lost"
		}
		running := "idle"
		if len(w.Running) > 0 {
			running = "running " + strings.Join(w.Running, ", ")
		}
		labels := "none"
		if len(w.Labels) > 0 {
			labels = strings.Join(w.Labels, ",")
		}
		fmt.Fprintf(io.Stdout, "%s  host %s  pid %d  slots %d  labels %s  %s  %s  last seen %s ago\n",
			w.Name, w.Host, w.PID, w.Slots, labels, state, running, w.Ago.Round(time.Second))
		for _, f := range w.Failover {
			fmt.Fprintf(io.Stdout, "    failover %s\n", f)
		}
	}
	if hidden > 0 {
		fmt.Fprintf(io.Stdout, "(%d worker(s) gone for more than an hour not shown: --all lists them)\n", hidden)
	}
	return nil
}

// validWorkerName reports whether name may name a worker. The name is
// printed on a line of its own kind (pipec workers, the workers' logs, the
// failover counts "w1 1, w2 0"), handed to tasks as PIPEC_WORKER and part of
// the default workdir's path, so it holds no space, comma, control
// character or path separator and does not start with a dot.
func validWorkerName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case i > 0 && (r == '_' || r == '.' || r == '-'):
		default:
			return false
		}
	}
	return true
}
