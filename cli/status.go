package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/report"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/spec/specload"
)

type statusOptions struct {
	state    stateFlag
	pipeline string
	json     bool
	// run: that run alone (status RUN [SPEC]).
	run string
}

func newStatusCmd(io IO) *cobra.Command {
	var opts statusOptions
	cmd := &cobra.Command{
		Use:   "status [SPEC|PLAN] | status RUN [SPEC|PLAN]",
		Short: "List runs and their tasks' states",
		Long: "Status lists the runs in the state (with SPEC, that spec's pipeline's only; with RUN, an id\n" +
			"such as orders/2024-01-01/r1 as pipec run and pipec submit print it, that run alone).\n" + stateOrder + "\n" +
			"A run's tasks are listed in the plan's order (upstream first) when SPEC is given and is the\n" +
			"run's pipeline, else in the order they started (and the output says so).",
		Args: withUsage(cobra.MaximumNArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec := ""
			switch len(args) {
			case 1:
				spec = args[0]
			case 2:
				if !isRunID(args[0]) {
					return usageErr("status: %q is not a run (such as orders/2024-01-01/r1); give a SPEC alone, or RUN and its SPEC", args[0])
				}
				opts.run, spec = args[0], args[1]
			}
			return runStatus(cmd.Context(), io, spec, opts)
		},
	}
	opts.state.registerHelp(cmd, stateBesideSpecOrHere)
	cmd.Flags().StringVar(&opts.pipeline, "pipeline", "", "only this pipeline's runs (with SPEC: SPEC's pipeline, the default)")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON")
	return cmd
}

// taskStatus is a task's state in one run, as status prints it.
type taskStatus struct {
	Task     string `json:"task"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	Token    int64  `json:"token,omitempty"`
	Class    string `json:"class,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

type runStatusJSON struct {
	ID       string     `json:"id"`
	Pipeline string     `json:"pipeline"`
	Interval string     `json:"interval"`
	State    string     `json:"state"`
	Created  time.Time  `json:"created"`
	Finished *time.Time `json:"finished,omitempty"`
	// Forced: the run was asked to run every task again (--force).
	Forced bool `json:"forced,omitempty"`
	// Waiting is what a run handed to workers waits for ("task extract:
	// waiting for a worker with labels spark (none is live)"), if anything.
	Waiting string       `json:"waiting,omitempty"`
	Tasks   []taskStatus `json:"tasks"`
	// TaskOrder is the order of Tasks: "plan" (the SPEC's plan) or
	// "started" (the order they first appear in the run's events).
	TaskOrder string `json:"task_order"`
	// Checks are the verdicts of the checks the run ran, by name: a run
	// whose tasks all succeeded fails when one rejected an output.
	Checks []checkStatus `json:"checks"`
}

// checkStatus is a check's last verdict in a run.
type checkStatus struct {
	Check    string `json:"check"`
	Artifact string `json:"artifact"`
	State    string `json:"state"` // passed or failed
	Reason   string `json:"reason,omitempty"`
}

// checkStates folds a run's check events into each check's last verdict,
// by name.
func checkStates(evs []store.Event) []checkStatus {
	by := map[string]checkStatus{}
	for _, ev := range evs {
		if ev.Kind != runtime.EventCheckPassed && ev.Kind != runtime.EventCheckFailed {
			continue
		}
		var p struct{ Check, Artifact, Reason string }
		if json.Unmarshal(ev.Payload, &p) != nil || p.Check == "" {
			continue
		}
		state := runtime.CheckPassed
		if ev.Kind == runtime.EventCheckFailed {
			state = runtime.CheckFailed
		}
		by[p.Check] = checkStatus{Check: p.Check, Artifact: p.Artifact, State: state, Reason: p.Reason}
	}
	out := []checkStatus{}
	for _, name := range slices.Sorted(mapKeysOf(by)) {
		out = append(out, by[name])
	}
	return out
}

// taskStates folds a run's attempts and events into one state per task: the
// runtime's verdict (task.succeeded, .failed, .not_run, .reused, .unknown,
// .adopted) when it recorded one, else the last attempt's state (a run that
// crashed).
// Tasks are in the order order gives (taskOrder).
func taskStates(as []store.Attempt, evs []store.Event, order func(a, b string) int) []taskStatus {
	by := map[string]*taskStatus{}
	get := func(name string) *taskStatus {
		if by[name] == nil {
			by[name] = &taskStatus{Task: name}
		}
		return by[name]
	}
	// A worker's claim starts an attempt its visit may leave unused (the
	// visit reused or adopted the task, or handed it back unbegun): it ran
	// nothing, so it is shown only when the task has nothing else.
	unused := map[string]bool{}
	// succeeded: the number of each task's newest attempt, when it
	// succeeded: a visit that failed before it (on a worker that failed
	// over: its disk full, a failed command) does not speak for the task.
	succeeded := map[string]int{}
	for _, a := range as {
		ts := get(a.Task)
		claimOnly := a.State == store.AttemptFailed && a.Class == queue.ClassNotStarted
		if claimOnly && ts.State != "" && !unused[a.Task] {
			continue
		}
		unused[a.Task] = claimOnly
		ts.Attempts = max(ts.Attempts, a.Number)
		ts.State, ts.Token, ts.Class = string(a.State), a.Token, a.Class
		delete(succeeded, a.Task)
		if a.State == store.AttemptSucceeded {
			succeeded[a.Task] = a.Number
		}
	}
	for _, ev := range evs {
		var st string
		switch ev.Kind {
		case runtime.EventTaskSucceeded:
			st = runtime.TaskSucceeded
		case runtime.EventTaskFailed:
			if n := succeeded[ev.Task]; ev.Attempt > 0 && ev.Attempt < n {
				continue
			}
			st = runtime.TaskFailed
		case runtime.EventTaskNotRun:
			st = runtime.TaskNotRun
		case runtime.EventTaskReused, runtime.EventAttemptAdopted:
			st = runtime.TaskReused
		case runtime.EventAttemptBlocked:
			st = runtime.TaskUnknown
		default:
			continue
		}
		ts := get(ev.Task)
		ts.State = st
		var p map[string]any
		if json.Unmarshal(ev.Payload, &p) == nil {
			if r, ok := p["reason"].(string); ok && st != runtime.TaskSucceeded {
				ts.Reason = r
			}
			if c, ok := p["class"].(string); ok {
				ts.Class = c
			}
		}
	}
	for name, ts := range by {
		if unused[name] && ts.State == runtime.TaskReused {
			ts.Attempts, ts.Token, ts.Class = 0, 0, ""
		}
	}
	var out []taskStatus
	for _, name := range slices.SortedFunc(mapKeysOf(by), order) {
		out = append(out, *by[name])
	}
	return out
}

func mapKeysOf[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func runStatus(ctx context.Context, io IO, spec string, opts statusOptions) error {
	// With SPEC, the runs of its pipeline: a state may hold several
	// pipelines (the specs of one folder share the state beside them).
	pipeline := opts.pipeline
	run := opts.run
	if run == "" && spec != "" && isRunID(spec) {
		if _, err := os.Stat(spec); errors.Is(err, fs.ErrNotExist) {
			run, spec = spec, "" // a run id, not a file
		}
	}
	if spec != "" {
		name, err := specPipeline(io, spec)
		if err != nil {
			return err
		}
		if pipeline != "" && pipeline != name {
			return usageErr("status: --pipeline %s, but %s is pipeline %s", pipeline, spec, name)
		}
		pipeline = name
	}
	loc, err := opts.state.location(io, spec)
	if err != nil {
		return err
	}
	st, err := openState(ctx, io, loc, true)
	if err != nil {
		return err
	}
	defer st.Close()
	if ctx == nil {
		ctx = context.Background()
	}
	var runs []store.Run
	if run == "" {
		runs, err = st.ListRuns(ctx, store.RunFilter{Pipeline: pipeline})
	} else {
		var r store.Run
		if r, err = st.GetRun(ctx, run); errors.Is(err, store.ErrNotFound) {
			return usageErr("status: no run %q in the state %s, and no such file (pipec status lists the runs)", run, loc)
		}
		runs = []store.Run{r}
	}
	if err != nil {
		return &exitError{Code: ExitFindings, Err: err}
	}
	plan := planForOrder(io, spec)
	var out []runStatusJSON
	var orders []string
	for _, r := range runs {
		as, err := st.Attempts(ctx, r.ID)
		if err != nil {
			return &exitError{Code: ExitFindings, Err: err}
		}
		evs, err := st.Events(ctx, r.ID)
		if err != nil {
			return &exitError{Code: ExitFindings, Err: err}
		}
		order, how := taskOrder(plan, r.Pipeline, evs)
		orders = append(orders, how)
		rs := runStatusJSON{ID: r.ID, Pipeline: r.Pipeline, Interval: r.Interval, State: string(r.State), Created: r.Created,
			Forced: r.Forced, Tasks: taskStates(as, evs, order), TaskOrder: how, Checks: checkStates(evs)}
		if !r.Finished.IsZero() {
			f := r.Finished
			rs.Finished = &f
		}
		if r.State == store.RunRunning {
			if rs.Waiting, err = waitingOf(ctx, st, r.ID, evs); err != nil {
				return &exitError{Code: ExitFindings, Err: err}
			}
		}
		out = append(out, rs)
	}
	if opts.json {
		if out == nil {
			out = []runStatusJSON{}
		}
		enc := json.NewEncoder(io.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"runs": out})
	}
	if len(out) == 0 {
		fmt.Fprintln(io.Stdout, "no runs")
		return nil
	}
	var b strings.Builder
	for _, r := range out {
		if r.Forced {
			fmt.Fprintf(&b, "%s  %s  (forced: nothing reused)\n", r.ID, r.State)
		} else {
			fmt.Fprintf(&b, "%s  %s\n", r.ID, r.State)
		}
		if r.Waiting != "" {
			fmt.Fprintf(&b, "  %s\n", r.Waiting)
		}
		width := 4
		for _, t := range r.Tasks {
			width = max(width, len(t.Task))
		}
		for _, t := range r.Tasks {
			line := fmt.Sprintf("  %-*s  %-9s", width, t.Task, t.State)
			if t.Attempts > 0 {
				line += fmt.Sprintf("  attempts %d  token %d", t.Attempts, t.Token)
			}
			if t.Class != "" {
				line += "  class " + t.Class
			}
			if t.Reason != "" {
				line += "  (" + t.Reason + ")"
			}
			b.WriteString(strings.TrimRight(line, " ") + "\n")
		}
		for _, c := range r.Checks {
			if c.State == runtime.CheckFailed {
				fmt.Fprintf(&b, "  check %s on %s: failed (%s)\n", c.Check, c.Artifact, c.Reason)
			}
		}
	}
	b.WriteString(orderNote(orders))
	// Reasons and error tails quote task output: escaped, like every text output.
	_, err = fmt.Fprint(io.Stdout, report.Escape(b.String()))
	return err
}

// waitingOf returns what a run handed to workers waits for ("" when
// nothing), from the queue of whichever state serves workers: PostgreSQL's
// own, or an SQLite file's. A run the queue does not know was run locally
// (it waits for no worker) or dispatched through an engine (pipec submit
// --engine): its workflow records the waiting in the run's log, evs.
func waitingOf(ctx context.Context, st store.Store, run string, evs []store.Event) (string, error) {
	if q, ok := st.(queue.Queue); ok {
		rs, err := q.Status(ctx, run)
		if !errors.Is(err, store.ErrNotFound) {
			return rs.Waiting, err
		}
	}
	var w runWaiting
	w.add(evs)
	return w.message(), nil
}

// specPipeline names the pipeline of a spec or plan file, for a command that
// only needs to know which pipeline it is: a spec with error findings in its
// tasks still names its pipeline (status while it is being edited); one
// that names none (it does not parse) is refused with its findings, exit 1.
// isRunID reports whether arg has the shape of a run's id,
// PIPELINE/INTERVAL/rN (the interval may hold more slashes).
func isRunID(arg string) bool {
	i := strings.LastIndexByte(arg, '/')
	if i < 0 || !strings.Contains(arg[:i], "/") || len(arg) < i+3 || arg[i+1] != 'r' {
		return false
	}
	_, err := strconv.ParseUint(arg[i+2:], 10, 32)
	return err == nil
}

func specPipeline(io IO, path string) (string, error) {
	if filepath.Ext(path) == ".json" {
		p, err := compiler.LoadPlan(path)
		if err != nil {
			return "", usageErr("%v", err)
		}
		return p.Pipeline, nil
	}
	if st, err := os.Stat(path); err != nil {
		return "", usageErr("%v", unwrapPathError(err))
	} else if st.IsDir() {
		return "", usageErr("%s is a folder; give a spec file (.hcl or .cue)", path)
	}
	p, src, ds, err := specload.LoadFile(path)
	if err != nil {
		return "", usageErr("%v", unwrapPathError(err))
	}
	if p == nil || p.Name == "" {
		printDiagsText(io, ds.Sort(), report.Sources{path: src})
		return "", &exitError{Code: ExitFindings, Err: fmt.Errorf("%s names no pipeline (give --pipeline NAME instead)", path)}
	}
	return p.Name, nil
}
