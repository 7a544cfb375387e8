// Package webview renders a pipec state as web pages: the runs, one run (its
// DAG with each task's state and a timeline of every attempt, with tokens,
// workers, relaunches, unknown attempts, fenced publishes and failovers), an
// artifact's visible versions with their lineage, and the workers. It is
// read-only: it calls only the read methods of store.Store (and of
// queue.Queue for the workers) and never writes the state.
//
// pipec ui serves the pages (Handler); pipec report writes one run's page as
// a self-contained file (Report). Every page is html/template output with
// the stylesheet inlined, the DAG and the timeline SVG laid out here in Go;
// the only script is the live refresh of a running run's page.
//
// Secrets: the runtime masks secret values before they reach the state, so
// what the state holds is already masked. Every text the pages show passes
// through Source.Redactor as well (the values of the secret_env names of the
// plans the viewer was given, read from its own environment), and through
// report.Escape, which writes control characters as visible escapes.
package webview

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/report"
	"github.com/pipec/pipec/runtime/exec"
	"github.com/pipec/pipec/runtime/objstore"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// Spec is a compiled plan the viewer was given and the folder of its spec
// (relative sink paths resolve against it).
type Spec struct {
	Plan *compiler.Plan
	Dir  string
}

// Source is what the pages read.
type Source struct {
	Store store.Store
	// Queue lists workers and gives the plans of submitted runs; nil when
	// the state cannot serve workers.
	Queue queue.Queue
	// Specs give the DAG of runs made by pipec run (the state keeps the plan
	// only of a submitted run) and the sinks' folders.
	Specs []Spec
	// Redactor masks secret values once more (nil masks nothing).
	Redactor *exec.Redactor
	// Now is the clock for "running for"; nil is time.Now.
	Now func() time.Time

	cache factsCache
	// objects serves the object store sinks the pages read.
	objects objstore.Clients
}

func (s *Source) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// text is how every string from the state reaches a page: secrets masked,
// control characters escaped. html/template escapes markup on output.
func (s *Source) text(v string) string { return report.Escape(s.Redactor.String(v)) }

// SecretsOf reads the values of every secret_env name of the plans from
// getenv, for Source.Redactor.
func SecretsOf(plans []*compiler.Plan, getenv func(string) string) *exec.Redactor {
	var vals []string
	for _, p := range plans {
		for _, t := range p.Tasks {
			for _, n := range t.SecretEnv {
				if v := getenv(n); v != "" {
					vals = append(vals, v)
				}
			}
		}
	}
	return exec.NewRedactor(vals)
}

// planOf finds the plan of a run: the submitted one, else a given spec of
// the same pipeline (exact when its digest is the run's).
func (s *Source) planOf(ctx context.Context, r store.Run) (p *compiler.Plan, dir, note string) {
	if s.Queue != nil {
		if sr, err := s.Queue.Submitted(ctx, r.ID); err == nil {
			var plan compiler.Plan
			if json.Unmarshal(sr.Plan, &plan) == nil {
				return &plan, sr.BaseDir, ""
			}
		}
	}
	for _, sp := range s.Specs {
		if sp.Plan.Pipeline == r.Pipeline {
			if r.PlanDigest != "" && sp.Plan.Digest != r.PlanDigest {
				return sp.Plan, sp.Dir, "the spec given has changed since this run (another plan digest): its DAG is drawn"
			}
			return sp.Plan, sp.Dir, ""
		}
	}
	return nil, "", "the state keeps the DAG of submitted runs only: give the spec (pipec ui --spec FILE) to draw this run's edges"
}

// payload decodes an event's JSON object (nil when empty or not an object).
func payload(e store.Event) map[string]any {
	if len(e.Payload) == 0 {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(e.Payload, &m) != nil {
		return nil
	}
	return m
}

func str(m map[string]any, k string) string {
	switch v := m[k].(type) {
	case string:
		return v
	case float64:
		return fmt.Sprint(int64(v))
	case bool:
		return fmt.Sprint(v)
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

func num(m map[string]any, k string) int64 {
	if v, ok := m[k].(float64); ok {
		return int64(v)
	}
	return 0
}

// RunRow is one run in the list.
type RunRow struct {
	ID, Pipeline, Interval, State, Who string
	Started                            time.Time
	Duration                           string
}

// who says who ran a run, from its first events.
func (s *Source) who(evs []store.Event) string {
	for _, e := range evs {
		p := payload(e)
		switch e.Kind {
		case queue.EventRunSubmitted:
			return "workers (submitted)"
		case store.EventRunCreated:
			if h := str(p, "owner_host"); h != "" {
				w := h + " pid " + str(p, "owner_pid")
				if o := str(p, "took_over"); o != "" {
					w += " (took over " + o + ")"
				}
				return s.text(w)
			}
		}
	}
	return "workers (submitted)"
}

func duration(from, to time.Time) string {
	if from.IsZero() || to.IsZero() || to.Before(from) {
		return ""
	}
	d := to.Sub(from)
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// RunFilter selects runs for the list: empty fields match everything.
type RunFilter struct {
	Pipeline, State string
	Limit           int
}

// Runs lists runs, newest first, at most f.Limit (default 200).
func (s *Source) Runs(ctx context.Context, f RunFilter) (rows []RunRow, pipelines []string, more bool, err error) {
	all, err := s.Store.ListRuns(ctx, store.RunFilter{})
	if err != nil {
		return nil, nil, false, err
	}
	seen := map[string]bool{}
	for _, r := range all {
		if !seen[r.Pipeline] {
			seen[r.Pipeline] = true
			pipelines = append(pipelines, s.text(r.Pipeline))
		}
	}
	slices.Sort(pipelines)
	limit := cmp.Or(f.Limit, 200)
	slices.SortStableFunc(all, func(a, b store.Run) int { return b.Created.Compare(a.Created) })
	for _, r := range all {
		if f.Pipeline != "" && r.Pipeline != f.Pipeline || f.State != "" && string(r.State) != f.State {
			continue
		}
		if len(rows) == limit {
			more = true
			break
		}
		f, err := s.facts(ctx, r)
		if err != nil {
			return nil, nil, false, err
		}
		end := r.Finished
		if r.State == store.RunRunning {
			end = s.now()
		}
		rows = append(rows, RunRow{ID: r.ID, Pipeline: s.text(r.Pipeline), Interval: s.text(r.Interval), State: string(r.State),
			Who: f.who, Started: r.Created, Duration: duration(r.Created, end)})
	}
	return rows, pipelines, more, nil
}

// AttemptView is one attempt as the run page shows it.
type AttemptView struct {
	Task     string
	Number   int
	Token    int64
	State    string
	Class    string
	ExitCode int
	Error    string
	Worker   string
	Host     string
	PID      int
	// Queued is when it was granted its token; Started when its process
	// ran (zero when it never did); Ended when it finished, Unknown when
	// its lease expired.
	Queued, Started, Ended, Unknown time.Time
	// Marks are what happened to it: relaunched, fenced publish, failover.
	Marks []Mark
}

// Mark is something that happened at a moment, drawn on the timeline and
// listed under it.
type Mark struct {
	Kind    string // fenced, relaunch, unknown, failover, retry, waiting, published, lease_lost
	Task    string
	Attempt int
	Time    time.Time
	Text    string
}

// TaskView is one task of a run.
type TaskView struct {
	Name     string
	State    string
	Needs    []string
	Attempts []*AttemptView
	Waiting  []Mark
}

// PublishView is one publish outcome of the run.
type PublishView struct {
	Outcome, Sink, Artifact, Interval, Label, Task string
	Attempt                                        int
	Token, HeldBy                                  int64
	Pipeline                                       string
	Time                                           time.Time
}

// RunVersion is an output an attempt of the run staged, and its audit.
type RunVersion struct {
	ID                      int64
	Artifact, Label, Task   string
	Attempt                 int
	Token                   int64
	State, Reason, Pipeline string
}

// RunView is everything the run page shows.
type RunView struct {
	Run      store.Run
	ID       string
	Pipeline string
	Interval string
	Code     string
	Who      string
	Duration string
	Tasks    []*TaskView
	Marks    []Mark
	Publish  []PublishView
	Versions []RunVersion
	DAGNote  string
	HasPlan  bool
	LastSeq  int64
	// End is the right edge of the timeline: the run's end, or now.
	End time.Time
}

// Running reports whether the run is still running (the page refreshes).
func (v *RunView) Running() bool { return v.Run.State == store.RunRunning }

var errNoRun = errors.New("no such run")

// LoadRun reads one run.
func (s *Source) LoadRun(ctx context.Context, id string) (*RunView, error) {
	r, err := s.Store.GetRun(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w %q", errNoRun, s.text(id))
	}
	if err != nil {
		return nil, err
	}
	atts, err := s.Store.Attempts(ctx, id)
	if err != nil {
		return nil, err
	}
	evs, err := s.Store.Events(ctx, id)
	if err != nil {
		return nil, err
	}
	v := &RunView{Run: r, ID: r.ID, Pipeline: s.text(r.Pipeline), Interval: s.text(r.Interval), Code: s.text(r.CodeVersion),
		Who: s.who(evs[:min(len(evs), 4)])}
	v.End = r.Finished
	if r.State == store.RunRunning || v.End.IsZero() {
		v.End = s.now()
	}
	v.Duration = duration(r.Created, v.End)

	tasks := map[string]*TaskView{}
	task := func(name string) *TaskView {
		t := tasks[name]
		if t == nil {
			t = &TaskView{Name: s.text(name)}
			tasks[name] = t
			v.Tasks = append(v.Tasks, t)
		}
		return t
	}
	plan, _, note := s.planOf(ctx, r)
	v.DAGNote = note
	if plan != nil {
		v.HasPlan = true
		for _, pt := range plan.Tasks {
			t := task(pt.Name)
			for _, n := range pt.Needs {
				t.Needs = append(t.Needs, s.text(n))
			}
		}
	}
	byRef := map[store.AttemptRef]*AttemptView{}
	for _, a := range atts {
		av := &AttemptView{Task: s.text(a.Task), Number: a.Number, Token: a.Token, State: string(a.State), Class: s.text(a.Class),
			ExitCode: a.ExitCode, Error: s.text(a.ErrorTail), Worker: s.text(a.Worker), Host: s.text(a.Host), PID: a.PID,
			Started: a.Started, Ended: a.Ended}
		if a.State == store.AttemptQueued {
			av.Started = time.Time{}
		}
		byRef[a.AttemptRef] = av
		t := task(a.Task)
		t.Attempts = append(t.Attempts, av)
	}
	final := map[string]string{}
	latest := map[string]*AttemptView{}
	for _, e := range evs {
		v.LastSeq = max(v.LastSeq, e.Seq)
		p := payload(e)
		av := byRef[store.AttemptRef{Run: id, Task: e.Task, Number: e.Attempt}]
		if av == nil && (e.Kind == queue.EventWorkFailover || e.Kind == queue.EventWorkLeaseLost || e.Kind == queue.EventWorkStopped) {
			// A worker's visit ended: it is about the task's latest attempt.
			av = latest[e.Task]
		}
		mark := func(kind, text string) {
			n := e.Attempt
			if av != nil {
				n = av.Number
			}
			m := Mark{Kind: kind, Task: s.text(e.Task), Attempt: n, Time: e.Time, Text: s.text(text)}
			v.Marks = append(v.Marks, m)
			if av != nil {
				av.Marks = append(av.Marks, m)
			} else if e.Task != "" {
				task(e.Task).Waiting = append(task(e.Task).Waiting, m)
			}
		}
		switch e.Kind {
		case store.EventAttemptStarted:
			if av != nil {
				av.Queued = e.Time
				latest[e.Task] = av
			}
			delete(final, e.Task) // a new attempt: whatever ended before is not the end
		case queue.EventWorkClaimed:
			delete(final, e.Task)
		case store.EventVersionRecorded:
			label := str(p, "label")
			art, _, _ := strings.Cut(label, "@")
			v.Versions = append(v.Versions, RunVersion{ID: num(p, "version"), Artifact: s.text(art), Label: s.text(label),
				Task: s.text(e.Task), Attempt: e.Attempt, Token: num(p, "token"), State: string(store.VersionStaged), Pipeline: v.Pipeline})
		case store.EventVersionAccepted, store.EventVersionRejected, store.EventVersionReopened:
			state := strings.TrimPrefix(e.Kind, "version.")
			if e.Kind == store.EventVersionReopened {
				state = string(store.VersionStaged) // audited again, by a later run
			}
			for i := range v.Versions {
				if v.Versions[i].ID == num(p, "version") {
					v.Versions[i].State = state
					v.Versions[i].Reason = s.text(str(p, "reason"))
				}
			}
		case "output.rejected":
			mark("rejected", "output "+str(p, "artifact")+" rejected"+withReason(str(p, "reason")))
		case "check.failed":
			// Also where no version of this run is rejected: an adopted
			// version audited by a check added since.
			mark("rejected", "check "+str(p, "check")+" on "+str(p, "artifact")+" failed"+withReason(str(p, "reason")))
		case store.EventAttemptUnknown:
			if av != nil {
				av.Unknown = e.Time
			}
			mark("unknown", "lease expired: attempt "+fmt.Sprint(e.Attempt)+" unknown (token "+str(p, "token")+")")
		case "attempt.relaunch":
			mark("relaunch", cmp.Or(str(p, "reason"), "relaunched with a new token"))
		case "attempt.retry":
			mark("retry", fmt.Sprintf("retry as attempt %s in %sms (class %s)", str(p, "next_attempt"), str(p, "delay_ms"), str(p, "class")))
		case "attempt.resolved":
			mark("resolved", "resolved as "+str(p, "as")+" by "+str(p, "by")+withReason(str(p, "reason")))
		case "attempt.abandoned", store.EventRunAbandoned:
			mark("abandoned", e.Kind+withReason(str(p, "reason")))
		case store.EventPublishFenced, store.EventPublishWon, store.EventPublishConflict, store.EventPublishIdempotent:
			outcome := strings.TrimPrefix(e.Kind, "publish.")
			pv := PublishView{Outcome: outcome, Sink: s.text(str(p, "sink")), Artifact: s.text(str(p, "artifact")),
				Interval: s.text(str(p, "interval")), Label: s.text(str(p, "label")), Task: s.text(e.Task), Attempt: e.Attempt,
				Token: num(p, "token"), HeldBy: max(num(p, "current_token"), num(p, "granted_token")), Pipeline: v.Pipeline, Time: e.Time}
			v.Publish = append(v.Publish, pv)
			switch outcome {
			case "fenced":
				held := ""
				if pv.HeldBy > 0 {
					held = fmt.Sprintf(", not above %d", pv.HeldBy)
				}
				switch str(p, "fenced_by") {
				case "sink":
					held += " (the sink's own record)"
				case "grant":
					held += " (a newer attempt was granted a token)"
				}
				mark("fenced", fmt.Sprintf("publish of %s to %s fenced: token %d%s", pv.Artifact, pv.Sink, pv.Token, held))
			case "won":
				mark("published", fmt.Sprintf("published %s to %s with token %d", pv.Artifact, pv.Sink, pv.Token))
			case "conflict":
				mark("fenced", fmt.Sprintf("publish of %s to %s lost a race (conflict)", pv.Artifact, pv.Sink))
			}
		case queue.EventWorkFailover:
			delete(final, e.Task) // the task goes on elsewhere
			mark("failover", "failover from "+str(p, "from")+withReason(str(p, "reason"))+" ("+str(p, "counts")+")")
		case queue.EventWorkLeaseLost:
			mark("lease_lost", "worker "+str(p, "worker")+" lost its lease")
		case queue.EventWorkStopped:
			mark("failover", "stopped on "+str(p, "worker")+withReason(str(p, "reason")))
		case queue.EventRunWaiting:
			w := str(p, "waiting")
			if rest, ok := strings.CutPrefix(w, "task "); ok {
				if name, _, ok := strings.Cut(rest, ":"); ok && tasks[name] != nil {
					e.Task = name
				}
			}
			mark("waiting", w)
		case "task.succeeded", "task.failed", "task.not_run", "task.reused":
			final[e.Task] = strings.TrimPrefix(e.Kind, "task.")
			if e.Kind == "task.not_run" || e.Kind == "task.reused" {
				task(e.Task)
			}
		case queue.EventWorkSucceeded:
			final[e.Task] = "succeeded"
		case queue.EventWorkNotRun:
			final[e.Task] = "not_run"
		}
	}
	for name, t := range tasks {
		switch {
		case final[name] != "":
			t.State = final[name]
		case len(t.Attempts) > 0:
			t.State = t.Attempts[len(t.Attempts)-1].State
			if r.State != store.RunRunning && (t.State == "running" || t.State == "queued") {
				t.State = "unknown"
			}
		case r.State == store.RunRunning:
			t.State = "pending"
		default:
			t.State = "not_run"
		}
		if t.State == "failed" && r.State == store.RunRunning && len(t.Attempts) > 0 && t.Attempts[len(t.Attempts)-1].State == "failed" &&
			final[name] == "" {
			t.State = "retrying"
		}
	}
	// Rows in the order the tasks started; those that never started last,
	// in the plan's order.
	slices.SortStableFunc(v.Tasks, func(a, b *TaskView) int {
		ta, tb := firstSeen(a), firstSeen(b)
		switch {
		case ta.IsZero() || tb.IsZero():
			return cmp.Compare(boolInt(ta.IsZero()), boolInt(tb.IsZero()))
		}
		return ta.Compare(tb)
	})
	return v, nil
}

func firstSeen(t *TaskView) time.Time {
	if len(t.Attempts) > 0 {
		a := t.Attempts[0]
		return cmp.Or(a.Queued, a.Started)
	}
	return time.Time{}
}

func withReason(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
