// Command pipec-temporal runs pipec's submitted runs on Temporal:
//
//	pipec-temporal worker --engine temporal://HOST:PORT[?namespace=NS] --state STATE [--name N] [--slots N] [--label L]...
//	pipec-temporal submit SPEC --interval I --engine ... --state STATE [--wait]
//	pipec-temporal cancel RUN --engine ...   (or --pipeline P --interval I)
//	pipec-temporal submit SPEC --due [--dry-run] [--wait] --engine ... --state STATE
//	pipec-temporal backfill SPEC --from D --to D --submit [--wait] --engine ... --state STATE
//
// submit --due and backfill are pipec's own commands (cli.EngineMain), the
// same flags and lines, with each interval handed to Temporal.
// PIPEC_ENGINE and PIPEC_STATE are the defaults of --engine and --state.
// The state grants tokens and records attempts, versions, pointers and
// workers exactly as for pipec worker; Temporal carries the dispatch. See
// docs/temporal.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/pipec/pipec/cli"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/temporal/dispatch"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "worker":
		err = worker(os.Args[2:])
	case "submit":
		if hasFlag(os.Args[2:], "due") {
			engineMain(os.Args[1:])
		}
		err = submit(os.Args[2:])
	case "backfill":
		engineMain(os.Args[1:])
	case "cancel":
		err = cancel(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		var ex exitCode
		if errors.As(err, &ex) {
			os.Exit(int(ex))
		}
		fmt.Fprintf(os.Stderr, "pipec-temporal: %v\n", err)
		os.Exit(1)
	}
}

// engineMain runs pipec's own command (submit --due, backfill --submit)
// with its runs handed to Temporal, and exits with its code.
func engineMain(args []string) {
	io, stop := cli.Interruptible(cli.Std(), os.Exit)
	e := &engine{}
	code := cli.EngineMain(args, io, e)
	stop()
	e.close()
	os.Exit(code)
}

// hasFlag says whether args set the boolean flag name (--name, or
// --name=true as pipec passes it on).
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--"+name || a == "--"+name+"=true" || a == "-"+name {
			return true
		}
	}
	return false
}

// engine hands pipec's runs to Temporal (cli.Engine): dispatch.Submit, on a
// client dialled at the first submission (a dry run dials nothing). The
// batch submits several intervals at once.
type engine struct {
	mu sync.Mutex
	c  client.Client
}

func (e *engine) client(value string) (client.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c == nil {
		c, err := dial(value)
		if err != nil {
			return nil, err
		}
		e.c = c
	}
	return e.c, nil
}

func (e *engine) Submit(ctx context.Context, value string, st store.Store, r cli.EngineRun) (store.Run, error) {
	c, err := e.client(value)
	if err != nil {
		return store.Run{}, err
	}
	sub, err := dispatch.Submit(ctx, c, st, dispatch.Submission{Plan: r.Plan, BaseDir: r.BaseDir, Interval: r.Interval, Value: r.Value,
		Force: r.Force})
	var busy *dispatch.BusyError
	if errors.As(err, &busy) {
		return store.Run{}, busy.RunBusy(ctx, st)
	}
	return sub.Run, err
}

func (e *engine) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c != nil {
		e.c.Close()
	}
}

type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

func usage() {
	fmt.Fprintln(os.Stderr, "usage: pipec-temporal worker|submit|backfill|cancel --engine temporal://HOST:PORT[?namespace=NS] --state STATE ...")
	os.Exit(2)
}

type labels []string

func (l *labels) String() string     { return strings.Join(*l, ",") }
func (l *labels) Set(v string) error { *l = append(*l, strings.Split(v, ",")...); return nil }

func common(fs *flag.FlagSet) (engine, state *string) {
	engine = fs.String("engine", os.Getenv("PIPEC_ENGINE"), "temporal://HOST:PORT[?namespace=NS] (default $PIPEC_ENGINE)")
	state = fs.String("state", os.Getenv("PIPEC_STATE"), "the shared state: an SQLite file or a postgres:// URL (default $PIPEC_STATE)")
	return
}

func dial(engine string) (client.Client, error) {
	e, err := dispatch.ParseEngine(engine)
	if err != nil {
		return nil, err
	}
	c, err := client.Dial(client.Options{HostPort: e.HostPort, Namespace: e.Namespace, Logger: quiet{}})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e, err)
	}
	return c, nil
}

// connect opens the shared state and dials the engine; on an error
// nothing is left open.
func connect(ctx context.Context, state, engine string) (*cli.Shared, client.Client, error) {
	sh, err := cli.OpenShared(ctx, state)
	if err != nil {
		return nil, nil, err
	}
	c, err := dial(engine)
	if err != nil {
		sh.Store.Close()
		return nil, nil, err
	}
	return sh, c, nil
}

// quiet drops the SDK's debug and info lines; warnings and errors go to
// stderr.
type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(msg string, kv ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"temporal: warn:", msg}, kv...)...)
}
func (quiet) Error(msg string, kv ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"temporal: error:", msg}, kv...)...)
}

var _ sdklog.Logger = quiet{}

func worker(args []string) error {
	fs := flag.NewFlagSet("worker", flag.ExitOnError)
	engine, state := common(fs)
	name := fs.String("name", os.Getenv("PIPEC_WORKER"), "the worker's name (default $PIPEC_WORKER, else host-pid)")
	slots := fs.Int("slots", 1, "tasks run at once")
	workdir := fs.String("workdir", "", "the worker's own scratch folder")
	arts := fs.String("artifacts", "", "the shared artifact store's folder as this machine mounts it")
	lease := fs.Duration("lease", 10*time.Second, "the worker's registration lease in the state")
	taskLease := fs.Duration("task-lease", 0, "the attempts' lease (0: the runtime's default)")
	unreachable := fs.Duration("unreachable", 0, "stop the running tasks when Temporal is unreachable this long (default 10s)")
	var ls labels
	fs.Var(&ls, "label", "a label this worker offers (repeatable)")
	_ = fs.Parse(args)
	host, _ := os.Hostname()
	if *name == "" {
		*name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if *workdir == "" {
		*workdir = filepath.Join(os.TempDir(), "pipec-worker-"+*name)
	}
	if err := os.MkdirAll(*workdir, 0o700); err != nil {
		return err
	}
	// Signals as pipec worker takes them (cli.Interruptible): the first
	// Ctrl-C or SIGTERM stops the worker cleanly, handing its tasks back,
	// and it exits 130 as pipec worker does; a second one exits at once.
	io, stop := cli.Interruptible(cli.Std(), os.Exit)
	defer stop()
	io.Graceful(cli.StoppingWorker)
	ctx := io.Context
	sh, c, err := connect(ctx, *state, *engine)
	if err != nil {
		return interrupted(ctx, err)
	}
	err = dispatch.RunWorker(ctx, dispatch.WorkerConfig{
		Info:  queue.WorkerInfo{Name: *name, Host: host, PID: os.Getpid(), Slots: *slots, Labels: ls},
		Store: sh.Store, Queue: sh.Queue, Client: c, Workdir: *workdir, Artifacts: *arts,
		DefaultArtifacts: sh.DefaultArtifacts, ServerState: sh.TaskState, Environ: os.Environ(),
		Lease: *lease, TaskLease: *taskLease, Unreachable: *unreachable, Log: os.Stderr})
	if !errors.Is(err, queue.ErrNotHandedBack) {
		// Not when the state did not answer: closing would wait for the
		// connections that wait on it, and Temporal's workers for the
		// visits that do.
		c.Close()
		sh.Store.Close()
	}
	return interrupted(ctx, err)
}

// interrupted is err, unless the worker stopped because it was told to
// (ctx cancelled by a signal): then it says so and exits 130.
func interrupted(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), cli.ErrInterrupted) && (err == nil || errors.Is(err, context.Canceled)) {
		fmt.Fprintln(os.Stderr, "pipec-temporal: interrupted")
		return exitCode(cli.ExitInterrupted)
	}
	return err
}

func submit(args []string) error {
	fs := flag.NewFlagSet("submit", flag.ExitOnError)
	engine, state := common(fs)
	interval := fs.String("interval", "", "the interval's start (required)")
	wait := fs.Bool("wait", false, "follow the run until it ends and exit with its status")
	arts := fs.String("artifacts", "", "the shared artifact store's folder, recorded with the run")
	hb := fs.Duration("heartbeat", 0, "the visits' heartbeat timeout on Temporal (default 10s)")
	force := fs.Bool("force", false, "run every task again, even those a previous run of the interval completed")
	_ = fs.Duration("poll", 0, "accepted for pipec submit's sake: --wait follows the workflow, it does not poll")
	// Flags may follow the spec, as in pipec submit SPEC --interval I.
	var spec string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		spec, args = args[0], args[1:]
	}
	_ = fs.Parse(args)
	if spec == "" && fs.NArg() > 0 {
		spec = fs.Arg(0)
	}
	if spec == "" || *interval == "" {
		return errors.New("submit SPEC --interval I: a spec and an interval are required")
	}
	io := cli.OSIO()
	plan, err := cli.LoadPlan(io, spec)
	if err != nil {
		return exitCode(1)
	}
	cli.WithArtifacts(plan, *arts)
	iv, err := runtime.ResolveInterval(plan.Schedule, *interval)
	if err != nil {
		return err
	}
	base, err := filepath.Abs(filepath.Dir(spec))
	if err != nil {
		return err
	}
	ctx := context.Background()
	if *state == "" {
		// As pipec submit: the state beside the spec.
		*state = filepath.Join(filepath.Dir(spec), store.DefaultPath)
	}
	sh, c, err := connect(ctx, *state, *engine)
	if err != nil {
		return err
	}
	defer sh.Store.Close()
	defer c.Close()
	if err := sh.RefuseForeignSinks(ctx, plan, base); err != nil {
		return err
	}
	sub, err := dispatch.Submit(ctx, c, sh.Store, dispatch.Submission{Plan: plan, BaseDir: base, Interval: iv, Value: *interval, Heartbeat: *hb,
		Force: *force})
	if err != nil {
		return err
	}
	fmt.Printf("submitted %s (%d tasks) as workflow %s\n", sub.Run.ID, len(plan.Tasks), sub.WorkflowID)
	if !*wait {
		return nil
	}
	s, err := dispatch.Wait(ctx, c, sub.WorkflowID, sub.RunID)
	for _, t := range s.Tasks {
		line := fmt.Sprintf("  %-20s %s", t.Task, t.State)
		if t.Reason != "" {
			line += "  " + t.Reason
		}
		fmt.Println(line)
	}
	if err != nil {
		fmt.Printf("run %s: %v\n", sub.Run.ID, err)
		return exitCode(1)
	}
	fmt.Printf("run %s %s\n", s.Run, s.State)
	if s.State != "succeeded" {
		return exitCode(1)
	}
	return nil
}

func cancel(args []string) error {
	fs := flag.NewFlagSet("cancel", flag.ExitOnError)
	engine, state := common(fs)
	pipeline := fs.String("pipeline", "", "the pipeline")
	interval := fs.String("interval", "", "the interval's key (as in the run's id)")
	stateID := fs.String("state-id", "", "the identity of the run's state (pipec cancel gives it; default: read from --state)")
	// pipec cancel RUN: the run's id (pipeline/interval/rN) or pipeline/interval.
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		parts := strings.Split(args[0], "/")
		if len(parts) < 2 || len(parts) > 3 {
			return fmt.Errorf("cancel %s: want a run id (orders/2024-01-01/r3) or pipeline/interval", args[0])
		}
		*pipeline, *interval = parts[0], parts[1]
		args = args[1:]
	}
	_ = fs.Parse(args)
	if *pipeline == "" || *interval == "" {
		return errors.New("cancel RUN, or cancel --pipeline P --interval I")
	}
	ctx := context.Background()
	if *stateID == "" {
		// The workflow's ID is its state's (dispatch.Names).
		sh, err := cli.OpenShared(ctx, *state)
		if err != nil {
			return err
		}
		*stateID, err = sh.Store.StateID(ctx)
		sh.Store.Close()
		if err != nil {
			return err
		}
	}
	c, err := dial(*engine)
	if err != nil {
		return err
	}
	defer c.Close()
	names := dispatch.Names{State: *stateID}
	if err := dispatch.Cancel(ctx, c, names, *pipeline, *interval); err != nil {
		return err
	}
	fmt.Printf("cancelled %s\n", names.WorkflowID(*pipeline, *interval))
	return nil
}
