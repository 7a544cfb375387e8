package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	stdio "io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/report"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/exec"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

type runOptions struct {
	execFlags
	interval string
	force    bool
	json     bool
	wait     bool
	// due runs what the schedule says is due at now (see due.go).
	due bool
	now string
	// dryRun, with due, prints what would be launched and launches nothing.
	dryRun bool
}

// execFlags are the flags of every command that executes runs (run, backfill).
type execFlags struct {
	state     stateFlag
	seed      uint64
	parallel  int
	artifacts artifactsFlag
}

// register adds the flags; parallelHelp says what --parallel bounds.
func (e *execFlags) register(cmd *cobra.Command, parallelHelp string) {
	f := cmd.Flags()
	e.state.register(cmd)
	f.Uint64Var(&e.seed, "seed", 0, "seed of the retry jitter: each task's delay after each attempt derives from (seed, task, attempt) alone (random when not given)")
	f.IntVar(&e.parallel, "parallel", 0, parallelHelp)
	e.artifacts.register(cmd, "the folder of the shared artifact store accepted versions are put into and read from "+
		"(wins over the spec's artifacts; default: versions/ beside the state)")
}

// resolve checks the flags and picks a random jitter seed unless --seed
// was given.
func (e *execFlags) resolve(cmd *cobra.Command) error {
	if e.parallel < 0 {
		return usageErr("%s: --parallel must be at least 1 (or 0: the number of CPUs), not %d", cmd.Name(), e.parallel)
	}
	if _, lowered := runtime.Parallel(e.parallel, "task(s) at once"); lowered != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "pipec %s: %s\n", cmd.Name(), lowered)
	}
	if !cmd.Flags().Changed("seed") {
		e.seed = randomSeed()
	}
	return nil
}

func newRunCmd(io IO) *cobra.Command {
	var opts runOptions
	cmd := &cobra.Command{
		Use:   "run SPEC|PLAN --interval DATE | --due",
		Short: "Compile and execute one interval with the local, fenced runtime",
		Long: "Run executes one data interval of a pipeline on this machine: tasks in dependency order,\n" +
			"each attempt with a fencing token, retries by error class, write-audit-publish of outputs.\n" +
			"SPEC is a .hcl or .cue file; PLAN is a plan written by `pipec compile` (.json). Tasks run\n" +
			"in the file's folder. A rerun of an interval reuses what the previous run completed.\n" +
			"One run of an interval at a time: while another pipec runs it, run is refused (exit 1)\n" +
			"naming that run and its owner; --wait waits for it instead. So is a run beyond the\n" +
			"schedule's max_active_runs, counting runs in progress in every process on the state.\n" +
			"The state is .pipec/state.db beside the file unless --state or PIPEC_STATE says otherwise.\n" +
			"--due (for cron or a CI schedule) runs instead the intervals due now: an interval is due once\n" +
			"it is over; without catch-up the latest one, with catchup = true every one since the\n" +
			"schedule's start that has no succeeded run; intervals in progress are skipped, at most\n" +
			"max_active_runs run at once (the state refuses more, whoever starts them). Nothing due:\n" +
			"exit 0, saying so. --due --dry-run prints what --due would run and launches nothing: no run\n" +
			"is created, and no state is made where there is none.\n\n" +
			"Exit code 1 when a task, check or publish failed.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.resolve(cmd); err != nil {
				return err
			}
			return runRun(cmd.Context(), io, args[0], opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.interval, "interval", "", "the interval's start: a date (2024-01-01) or an RFC 3339 time (required)")
	f.BoolVar(&opts.force, "force", false, "rerun every task, even those a previous run of the interval completed")
	f.BoolVar(&opts.json, "json", false, "write the event stream as JSON lines, then the summary")
	f.BoolVar(&opts.wait, "wait", false, "wait for another live run of the interval to end (or, with max_active_runs, for a free run slot) instead of refusing")
	f.BoolVar(&opts.due, "due", false, "instead of --interval: run the intervals due now by the schedule (the latest; every missed one with catchup = true), at most max_active_runs at once")
	f.StringVar(&opts.now, "now", "", "with --due: judge what is due at this RFC 3339 time instead of the wall clock (also "+nowEnv+")")
	_ = f.MarkHidden("now")
	f.BoolVar(&opts.dryRun, "dry-run", false, "with --due: print what would be run, and launch nothing")
	opts.register(cmd, "tasks running at once (default: the number of CPUs; lowered to what the open-file limit allows)")
	return cmd
}

func randomSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// loadPlan reads a spec (compiling it) or a compiled plan (.json). Findings
// are printed; a spec with errors is exit code 1, unreadable input 2.
func loadPlan(io IO, path string) (*compiler.Plan, error) {
	return loadPlanShowing(io, path, nil)
}

// loadPlanForWorkers is loadPlan for a plan handed to workers (pipec
// submit, backfill --submit, an engine's submit): it also shows the
// warnings that concern them, which a local run has no use for: a path on
// one machine's disk (local-artifact).
func loadPlanForWorkers(io IO, path string) (*compiler.Plan, error) {
	return loadPlanShowing(io, path, []string{"local-artifact"})
}

// loadPlanShowing is loadPlan, printing the warnings of the rules shown
// beside the errors.
func loadPlanShowing(io IO, path string, shown []string) (*compiler.Plan, error) {
	if filepath.Ext(path) == ".json" {
		// A plan is input like a spec: names and references are checked again.
		p, err := compiler.LoadPlan(path)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		return p, nil
	}
	c, err := compileFile(path)
	if err != nil {
		return nil, err
	}
	ds := slices.Clip(c.Diags) // appended to: never into c.Diags' array
	for _, w := range c.Warnings {
		if slices.Contains(shown, w.Rule) {
			ds = append(ds, w)
		}
	}
	printDiagsText(io, ds.Sort(), c.sources())
	if c.Diags.HasErrors() || c.Result == nil || c.Result.Plan == nil {
		return nil, silentExit(ExitFindings)
	}
	return c.Result.Plan, nil
}

func runRun(ctx context.Context, io IO, path string, opts runOptions) error {
	if opts.due {
		return runRunDue(ctx, io, path, opts)
	}
	if opts.dryRun {
		return usageErr("run: --dry-run previews --due (pipec backfill --dry-run previews a range of intervals)")
	}
	if opts.interval == "" {
		return usageErr("run: --interval is required (the interval's start, such as --interval 2024-01-01), or --due")
	}
	plan, err := loadPlan(io, path)
	if err != nil {
		return err
	}
	if _, err := runtime.ResolveInterval(plan.Schedule, opts.interval); err != nil {
		return usageErr("%v", err)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	// A reader that goes away (pipec run --json | head) does not kill the
	// run: cmd/pipec watches SIGPIPE and IO drops the lost output (see
	// Interruptible). Ignoring SIGPIPE here instead would pass SIG_IGN on to
	// every task pipec starts.
	loc, err := opts.state.location(io, path)
	if err != nil {
		return err
	}
	st, err := openState(ctx, io, loc, false)
	if err != nil {
		return err
	}
	defer st.Close()

	var pr progress
	switch {
	case opts.json:
		logCtx, done := runtime.AfterStop(ctx, exec.DefaultKillGrace, runtime.DefaultRecordWithin)
		defer done()
		pr = &logFollower{ctx: logCtx, st: st, enc: json.NewEncoder(io.Stdout)}
	case io.StdoutTTY:
		pr = newLiveProgress(io, plan)
	default:
		pr = &lineProgress{io: io}
	}
	arts, err := opts.artifacts.path()
	if err != nil {
		return err
	}
	sum, err := runtime.Run(ctx, runtime.Options{
		Artifacts:   arts,
		Plan:        plan,
		BaseDir:     filepath.Dir(path),
		Interval:    opts.interval,
		Store:       st,
		StatePath:   loc.Path,
		ServerState: serverState(loc),
		Seed:        opts.seed,
		Force:       opts.force,
		Parallel:    opts.parallel,
		Environ:     io.Environ(),
		OnEvent:     pr.event,
		Wait:        opts.wait,
		OnWait: func(b *store.RunBusyError) {
			fmt.Fprintf(io.Stderr, "pipec: waiting: %s\n", busyMessage(plan.Pipeline, opts.interval, b))
		},
		MaxActiveRuns: maxActiveRuns(plan),
		OnWaitSlot: func(e *store.RunSlotsError) {
			fmt.Fprintf(io.Stderr, "pipec: waiting for a free run slot: %s\n", e.Detail())
		},
		OnStateSilent: (&stateSilence{w: io.Stderr}).told,
	})
	pr.done()
	if busy := (*store.RunBusyError)(nil); errors.As(err, &busy) {
		return &exitError{Code: ExitFindings, Err: fmt.Errorf("%s; wait for it with --wait, or stop it", busyMessage(plan.Pipeline, opts.interval, busy))}
	}
	if full := (*store.RunSlotsError)(nil); errors.As(err, &full) {
		return &exitError{Code: ExitFindings, Err: fmt.Errorf("%v; wait for one with --wait", full)}
	}
	if err != nil && sum == nil {
		return &exitError{Code: ExitFindings, Err: err}
	}
	// A run whose end the store could not record still says what it did.
	relativize(sum)
	if opts.json {
		if err := json.NewEncoder(io.Stdout).Encode(map[string]any{"kind": "run.summary", "summary": sum}); err != nil {
			return err
		}
	} else {
		if !io.StdoutTTY {
			fmt.Fprintln(io.Stdout)
		}
		// Escaped: the summary quotes task output and spec paths.
		var b bytes.Buffer
		if err := sum.WriteText(&b); err != nil {
			return err
		}
		if _, err := stdio.WriteString(io.Stdout, report.Escape(b.String())); err != nil {
			return err
		}
	}
	if err != nil {
		return &exitError{Code: ExitFindings, Err: err}
	}
	if sum.Failed {
		return silentExit(ExitFindings)
	}
	return nil
}

// runRunDue is pipec run --due: the due intervals, run here.
func runRunDue(ctx context.Context, io IO, path string, opts runOptions) error {
	if opts.interval != "" || opts.force || opts.json || opts.wait {
		return usageErr("run: --due decides the intervals itself: it takes neither --interval, --force, --json nor --wait")
	}
	now, err := dueNow(io, opts.now)
	if err != nil {
		return err
	}
	plan, err := loadPlan(io, path)
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	loc, err := opts.state.location(io, path)
	if err != nil {
		return err
	}
	if opts.dryRun {
		st, err := openIfExists(ctx, io, loc)
		if err != nil {
			return err
		}
		if st != nil {
			defer st.Close()
		}
		return dueRun(ctx, io, plan, st, workQueue(st), now, nil, false, false, true)
	}
	st, err := openState(ctx, io, loc, false)
	if err != nil {
		return err
	}
	defer st.Close()
	arts, err := opts.artifacts.path()
	if err != nil {
		return err
	}
	launch, stop := localLaunch(io, plan, path, st, loc, opts.seed, runtime.NewSlots(plan, opts.parallel), arts, false)
	defer stop()
	return dueRun(ctx, io, plan, st, workQueue(st), now, launch, false, false, false)
}

// busyMessage names the run that holds an interval and its owner.
func busyMessage(pipeline, interval string, b *store.RunBusyError) string {
	return fmt.Sprintf("interval %s of pipeline %s is being run by %s", interval, pipeline, b.Holder())
}

// relativize prints sink paths relative to the working directory when they
// are inside it, so the summary reads like a command to type.
func relativize(sum *runtime.Summary) {
	wd, err := os.Getwd()
	if err != nil {
		return
	}
	rel := func(p string) string {
		if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
		return p
	}
	for i := range sum.Publish {
		if sum.Publish[i].Visible != "" {
			sum.Publish[i].Visible = rel(sum.Publish[i].Visible)
		}
		if sum.Publish[i].VersionDir != "" {
			sum.Publish[i].VersionDir = rel(sum.Publish[i].VersionDir)
		}
	}
}

// progress shows the run's events as they happen.
type progress interface {
	event(runtime.Event)
	done()
}

// lineProgress prints one line per state change (CI, pipes).
type lineProgress struct{ io IO }

func (p *lineProgress) event(ev runtime.Event) {
	if line := describeEvent(ev); line != "" {
		fmt.Fprintln(p.io.Stdout, line)
	}
}
func (p *lineProgress) done() {}

// liveProgress keeps a status line at the bottom of the terminal (tasks
// running, done, failed, retrying with their next delay) and prints the
// state changes that matter above it.
type liveProgress struct {
	io       IO
	plan     *compiler.Plan
	mu       sync.Mutex
	total    int
	running  map[string]bool
	retrying map[string]time.Time
	done_    int
	failed   int
	ticker   *time.Ticker
	stop     chan struct{}
}

func newLiveProgress(io IO, plan *compiler.Plan) *liveProgress {
	p := &liveProgress{io: io, plan: plan, total: len(plan.Tasks), running: map[string]bool{}, retrying: map[string]time.Time{},
		ticker: time.NewTicker(200 * time.Millisecond), stop: make(chan struct{})}
	go func() {
		for {
			select {
			case <-p.ticker.C:
				p.mu.Lock()
				p.redraw()
				p.mu.Unlock()
			case <-p.stop:
				return
			}
		}
	}()
	return p
}

func (p *liveProgress) event(ev runtime.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev.Kind {
	case store.EventAttemptRunning:
		p.running[ev.Task] = true
		delete(p.retrying, ev.Task)
	case runtime.EventAttemptRetry:
		delete(p.running, ev.Task)
		if ms, ok := ev.Data["delay_ms"].(int64); ok {
			p.retrying[ev.Task] = time.Now().Add(time.Duration(ms) * time.Millisecond)
		}
	case runtime.EventTaskSucceeded, runtime.EventTaskReused:
		delete(p.running, ev.Task)
		p.done_++
	case runtime.EventTaskFailed, runtime.EventTaskNotRun, runtime.EventAttemptBlocked:
		delete(p.running, ev.Task)
		delete(p.retrying, ev.Task)
		p.failed++
	}
	if important(ev.Kind) {
		fmt.Fprintf(p.io.Stdout, "\r\033[K%s\n", describeEvent(ev))
	}
	p.redraw()
}

func (p *liveProgress) redraw() {
	var names []string
	for n := range p.running {
		names = append(names, n)
	}
	sortTasks(p.plan, names)
	line := fmt.Sprintf("%d/%d done, %d failed, %d running", p.done_, p.total, p.failed, len(names))
	if len(names) > 0 {
		shown := names
		if len(shown) > 4 {
			shown = shown[:4]
		}
		line += ": " + strings.Join(shown, ", ")
		if len(names) > len(shown) {
			line += ", ..."
		}
	}
	var retr []string
	for n, at := range p.retrying {
		retr = append(retr, fmt.Sprintf("%s in %s", n, max(0, time.Until(at)).Round(100*time.Millisecond)))
	}
	sort.Strings(retr)
	if len(retr) > 0 {
		line += "; retrying " + strings.Join(retr, ", ")
	}
	fmt.Fprintf(p.io.Stdout, "\r\033[K%s", line)
}

func (p *liveProgress) done() {
	close(p.stop)
	p.ticker.Stop()
	p.mu.Lock()
	fmt.Fprint(p.io.Stdout, "\r\033[K")
	p.mu.Unlock()
}

// important are the events the live view prints as lines.
func important(kind string) bool {
	switch kind {
	case runtime.EventTaskFailed, runtime.EventTaskNotRun, runtime.EventAttemptRetry, runtime.EventAttemptLease,
		runtime.EventCheckFailed, store.EventPublishFenced, store.EventPublishWon, store.EventAttemptUnknown,
		runtime.EventPublishFailed, runtime.EventRunSuperseded, runtime.EventZombieKilled, runtime.EventSinkReconciled,
		runtime.EventOrphansEnded, runtime.EventAttemptBlocked, runtime.EventAttemptAdopted, queue.EventRunWaiting:
		return true
	}
	return false
}

// describeEvent is one line for a state change, escaped: errors quote task
// output, which may hold terminal escape sequences.
func describeEvent(ev runtime.Event) string { return report.Escape(describeEventText(ev)) }

// describeEventText is the one-line form of a state change, or "" for events
// that are not one (a version recorded, an attempt's pid).
func describeEventText(ev runtime.Event) string {
	who := ev.Task
	if ev.Attempt > 0 {
		who = fmt.Sprintf("%s#%d", ev.Task, ev.Attempt)
	}
	d := ev.Data
	str := func(k string) string {
		if v, ok := d[k]; ok && v != nil {
			if k == "version" || k == "label" {
				return runtime.ShortLabel(fmt.Sprint(v))
			}
			return fmt.Sprint(v)
		}
		return ""
	}
	switch ev.Kind {
	case store.EventRunCreated:
		return fmt.Sprintf("run %s started (interval %s)", ev.Run, str("interval"))
	case runtime.EventRunSuperseded:
		return fmt.Sprintf("run %s never finished; its attempts are fenced by this run's tokens", str("superseded"))
	case runtime.EventSinkReconciled:
		if e := str("error"); e != "" {
			return fmt.Sprintf("sink %s: reconcile failed: %s", str("sink"), e)
		}
		return fmt.Sprintf("sink %s: %s link(s) repaired from the store (a publish whose response was lost)", str("sink"), str("links_repaired"))
	case store.EventAttemptRunning:
		// attempt.started is the token grant, while the attempt may still
		// wait for a slot; this is its process starting.
		return fmt.Sprintf("%s started, token %s", who, str("token"))
	case store.EventAttemptFinished:
		late := ""
		if str("was") == "unknown" {
			late = " (after its lease had expired)"
		}
		if str("state") == "succeeded" {
			return fmt.Sprintf("%s succeeded%s", who, late)
		}
		why := str("why")
		if why == "" {
			// Recorded without one (an attempt that could not start, by an
			// older pipec): the first line of its error says why.
			why, _, _ = strings.Cut(strings.TrimSpace(str("error")), "\n")
		}
		ended := "failed"
		if str("state") == "unknown" {
			ended = "ended unknown (its effect may have happened)"
		}
		return fmt.Sprintf("%s %s%s%s", who, ended, late, after(": ", list(", ", labelled("class ", str("class")), why)))
	case store.EventAttemptUnknown:
		if d["relaunch"] == true {
			return fmt.Sprintf("%s unknown: lease expired (token %s); relaunching without waiting for it", who, str("token"))
		}
		return fmt.Sprintf("%s unknown: lease expired%s%s", who, paren(labelled("token ", str("token"))), after("; ", str("reason")))
	case runtime.EventAttemptRetry:
		next := str("next_attempt")
		if next != "" {
			next = "attempt " + next + " next"
		}
		return fmt.Sprintf("%s will retry in %s%s", who,
			(time.Duration(toInt64(d["delay_ms"])) * time.Millisecond).String(), paren(list("; ", labelled("class ", str("class")), next)))
	case runtime.EventAttemptLease:
		return fmt.Sprintf("%s relaunching%s", ev.Task, after(": ", str("reason")))
	case runtime.EventZombieKilled:
		return fmt.Sprintf("%s killed%s", who, after(": ", str("reason")))
	case runtime.EventTaskSucceeded:
		return fmt.Sprintf("%s done", ev.Task)
	case runtime.EventTaskReused:
		return fmt.Sprintf("%s reused%s", ev.Task, paren(str("reason")))
	case runtime.EventTaskOutdated:
		return fmt.Sprintf("%s runs again: %s", ev.Task, str("reason"))
	case runtime.EventTaskFailed:
		return fmt.Sprintf("%s FAILED: class %s%s", ev.Task, orDash(str("class")), paren(str("reason")))
	case runtime.EventTaskNotRun:
		return fmt.Sprintf("%s not run%s", ev.Task, after(": ", str("reason")))
	case runtime.EventOrphansEnded:
		return fmt.Sprintf("%s of %s: ended %s process(es) it left running when its pipec died", who, str("run_of_attempt"), str("processes"))
	case runtime.EventAttemptBlocked:
		return fmt.Sprintf("%s UNKNOWN%s", ev.Task, after(": ", str("reason")))
	case runtime.EventAttemptAdopted:
		return fmt.Sprintf("%s not run again%s", ev.Task, after(": ", str("reason")))
	case runtime.EventCheckPassed:
		return fmt.Sprintf("check %s passed on %s", str("check"), str("label"))
	case runtime.EventCheckFailed:
		return fmt.Sprintf("check %s FAILED on %s%s", str("check"), str("label"), after(": ", str("reason")))
	case store.EventPublishWon, store.EventPublishIdempotent:
		return fmt.Sprintf("publish %s -> %s: %s (%s, token %s)", str("publish"), str("sink"), strings.TrimPrefix(ev.Kind, "publish."),
			str("label"), str("token"))
	case store.EventPublishFenced:
		switch str("fenced_by") {
		case "grant":
			return fmt.Sprintf("publish %s -> %s: FENCED, %s token %s: a newer attempt of %s was granted token %s", str("publish"),
				str("sink"), who, str("token"), ev.Task, str("held_token"))
		case "sink":
			return fmt.Sprintf("publish %s -> %s: FENCED, %s token %s is not above the sink's own record, token %s", str("publish"),
				str("sink"), who, str("token"), str("held_token"))
		}
		return fmt.Sprintf("publish %s -> %s: FENCED, %s token %s is older than the pointer's %s", str("publish"), str("sink"),
			who, str("token"), str("pointer_token"))
	case runtime.EventPublishFailed:
		return fmt.Sprintf("publish %s FAILED%s", str("publish"), after(": ", str("error")))
	case runtime.EventOutputRejected:
		return fmt.Sprintf("%s#%d output %s REJECTED%s", ev.Task, ev.Attempt, str("artifact"), after(": ", str("reason")))
	case store.EventVersionReopened:
		return fmt.Sprintf("%s#%d output %s audited again%s", ev.Task, ev.Attempt, str("label"), after(": ", str("reason")))
	case runtime.EventOutputLeft:
		return fmt.Sprintf("%s#%d output %s left staged for the next run to audit%s", ev.Task, ev.Attempt, str("artifact"),
			after(": ", str("reason")))
	case queue.EventRunWaiting:
		return fmt.Sprintf("waiting: %s", str("waiting"))
	}
	return ""
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int:
		return int64(n)
	case float64:
		return int64(n)
	}
	return 0
}

// list joins the parts that are not empty with sep: a field an event was
// recorded without prints as nothing, never as an empty item ("class start, ").
func list(sep string, parts ...string) string {
	kept := parts[:0:0]
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, sep)
}

// labelled is label+v ("class start"), or "" when v is empty.
func labelled(label, v string) string {
	if v == "" {
		return ""
	}
	return label + v
}

// after is sep+s (": reason"), or "" when s is empty.
func after(sep, s string) string { return labelled(sep, s) }

// paren is " (s)", or "" when s is empty.
func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
