package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/retry"
	"github.com/pipec/pipec/runtime/store"
)

// Publish outcomes in a summary beside the store's won, idempotent, fenced.
const (
	PublishNotRun = "not_run"
	PublishError  = "error"
)

// Summary is what a run did, for the end-of-run report and --json.
type Summary struct {
	// Run is the store's record of the run (the JSON form has its id and
	// state as run_id and state).
	Run      store.Run       `json:"-"`
	RunID    string          `json:"run_id"`
	State    string          `json:"state"`
	Interval string          `json:"interval"`
	Tasks    []TaskResult    `json:"tasks"`
	Checks   []CheckResult   `json:"checks"`
	Publish  []PublishResult `json:"publishes"`
	// Fenced lists publishes refused because a newer token held the pointer.
	Fenced []FencedPublish `json:"fenced"`
	// AtLeastOnce names the sinks published with fencing = "none".
	AtLeastOnce []string `json:"at_least_once_sinks"`
	// StoreError says what failed when the state database could not be
	// written or read during the run (disk full, a file size limit, a
	// read-only file): the tasks it hit are failed with class "store", and
	// when the run's end could not be recorded either, the next run of the
	// interval takes it over and resumes.
	StoreError string `json:"store_error,omitempty"`
	// ArtifactsError says why an accepted output could not be put into the
	// artifact store (its version is rejected; its dependents do not run),
	// or an accepted input could not be read from it (the task failed with
	// class ClassArtifacts).
	ArtifactsError string `json:"artifacts_error,omitempty"`
	// Unreadable lists the outputs that could not become a version because
	// of what the task put in them (a link or a device in the output's
	// folder), and why: like a failed check, each fails the run.
	Unreadable []string `json:"unreadable_outputs,omitempty"`
	// Superseded says why the run ended under its pipec, for a run that
	// another run of its interval took over (its lease expired while its
	// pipec was stopped, or could not reach the state): what it did after
	// is fenced, and the other run carries the interval on.
	Superseded string `json:"superseded,omitempty"`
	// Failed is true when a task or check failed, or a publish errored.
	Failed bool `json:"failed"`
}

// TaskResult is one task's end state.
type TaskResult struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	Class    string `json:"class,omitempty"`
	ExitCode int    `json:"exit_code,omitempty"`
	// Ending is how the last attempt's process ended, for a failed task:
	// "exit code 3", "timed out after 20m", "killed by signal SIGKILL",
	// "could not start: ./x.sh: no such file or directory".
	Ending string `json:"ending,omitempty"`
	// Error is the tail of the failed attempt's output (secrets redacted).
	Error string `json:"error,omitempty"`
	// Reason says why the task failed, was not run or was reused.
	Reason string `json:"reason,omitempty"`
}

// CheckResult is one check's verdict on this run's version of its artifact.
type CheckResult struct {
	Name     string `json:"name"`
	Artifact string `json:"artifact"`
	State    string `json:"state"`
	Version  string `json:"version,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// PublishResult is one publish's outcome.
type PublishResult struct {
	Name     string `json:"name"`
	Sink     string `json:"sink"`
	Artifact string `json:"artifact"`
	// Outcome is won, idempotent, fenced, not_run or error.
	Outcome    string `json:"outcome"`
	Version    string `json:"version,omitempty"`
	Token      int64  `json:"token,omitempty"`
	Task       string `json:"task,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	Visible    string `json:"visible,omitempty"`
	VersionDir string `json:"version_dir,omitempty"`
	// AtLeastOnce: the sink is not fenced (fencing = "none").
	AtLeastOnce bool   `json:"at_least_once,omitempty"`
	Error       string `json:"error,omitempty"`
}

// FencedPublish is a publish refused by the sink's pointer: the attempt's
// token was older than the one that already published.
type FencedPublish struct {
	Publish  string `json:"publish"`
	Sink     string `json:"sink"`
	Artifact string `json:"artifact"`
	Run      string `json:"run"`
	Task     string `json:"task"`
	Attempt  int    `json:"attempt"`
	Token    int64  `json:"token"`
	HeldBy   int64  `json:"held_by_token"`
	// FencedBy is who refused it: "sink" (the sink's own record), "pointer"
	// (the store's pointer) or "grant" (a newer attempt of the task holds a
	// higher token, published or not).
	FencedBy string `json:"fenced_by,omitempty"`
}

func (r *runner) summary(run store.Run) *Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &Summary{Run: run, Interval: r.iv.Key, Fenced: slices.Clone(r.fenced), AtLeastOnce: []string{}}
	// Tasks in the plan's topological order: upstream first, as they ran.
	var names []string
	for _, id := range r.plan.Order {
		if name, ok := cutKind(id, compiler.KindTask); ok && r.tasks[name] != nil {
			names = append(names, name)
		}
	}
	for _, name := range names {
		ts := r.tasks[name]
		tr := ts.res
		tr.State = ts.state
		s.Tasks = append(s.Tasks, tr)
		if ts.state == TaskFailed || ts.state == TaskNotRun || ts.state == TaskUnknown {
			s.Failed = true
		}
		if ts.state == TaskFailed && tr.Class == retry.Store && s.StoreError == "" {
			s.StoreError = StoreFailure(fmt.Sprintf("task %s: %s", name, tr.Error))
		}
	}
	for _, name := range slices.Sorted(mapKeys(r.checks)) {
		c := *r.checks[name]
		s.Checks = append(s.Checks, c)
		if c.State != CheckPassed {
			s.Failed = true
		}
	}
	if r.artsErr != "" {
		s.ArtifactsError = r.artsErr
		s.Failed = true
	}
	for _, out := range slices.Sorted(mapKeys(r.unreadable)) {
		s.Unreadable = append(s.Unreadable, r.unreadable[out])
		s.Failed = true
	}
	if s.StoreError == "" && r.storeErr != "" {
		s.StoreError = StoreFailure(r.storeErr)
		s.Failed = true
	}
	if err := r.recordsGivenUp(); err != nil {
		// What failed for it ("context canceled") says less than why.
		s.StoreError, s.Failed = err.Error(), true
	}
	s.Publish = slices.Clone(r.publishes)
	slices.SortFunc(s.Publish, func(a, b PublishResult) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range s.Publish {
		if p.Outcome == PublishError || p.Outcome == PublishNotRun {
			s.Failed = true
		}
		if p.AtLeastOnce && !slices.Contains(s.AtLeastOnce, p.Sink) {
			s.AtLeastOnce = append(s.AtLeastOnce, p.Sink)
		}
	}
	for _, sk := range r.plan.Sinks {
		if sk.Fencing == "none" && !slices.Contains(s.AtLeastOnce, sk.Name) {
			s.AtLeastOnce = append(s.AtLeastOnce, sk.Name)
		}
	}
	slices.Sort(s.AtLeastOnce)
	slices.SortFunc(s.Fenced, func(a, b FencedPublish) int {
		return strings.Compare(fmt.Sprintf("%s/%s/%09d", a.Publish, a.Task, a.Attempt), fmt.Sprintf("%s/%s/%09d", b.Publish, b.Task, b.Attempt))
	})
	r.redactSummary(s)
	return s
}

// WriteText prints the summary for a person: one line per task, then checks,
// publishes (where the data is visible), fenced publishes and at-least-once
// sinks, then the verdict.
func (s *Summary) WriteText(w io.Writer) error {
	var b strings.Builder
	state := "succeeded"
	switch {
	case s.Run.State == store.RunCancelled:
		state = "CANCELLED " + s.Run.Cancelled
	case s.Superseded != "":
		state = "FAILED: " + s.Superseded
	case s.Failed:
		state = "FAILED"
	}
	fmt.Fprintf(&b, "run %s %s\n", s.Run.ID, state)
	width := 4
	for _, t := range s.Tasks {
		width = max(width, len(t.Name))
	}
	for _, t := range s.Tasks {
		line := fmt.Sprintf("  task    %-*s  %-9s", width, t.Name, t.State)
		if t.Attempts > 0 {
			line += fmt.Sprintf("  attempts %d", t.Attempts)
		}
		switch t.State {
		case TaskFailed:
			line += fmt.Sprintf("  class %s", orDash(t.Class))
			if t.Ending != "" {
				line += "  " + t.Ending
			} else if t.ExitCode != 0 {
				line += fmt.Sprintf("  exit %d", t.ExitCode)
			}
			if t.Reason != "" {
				line += "  (" + t.Reason + ")"
			}
		case TaskNotRun, TaskReused, TaskUnknown:
			if t.Reason != "" {
				line += "  (" + t.Reason + ")"
			}
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
		if t.State == TaskFailed && t.Error != "" {
			for _, l := range strings.Split(t.Error, "\n") {
				b.WriteString("          | " + l + "\n")
			}
		}
	}
	for _, c := range s.Checks {
		line := fmt.Sprintf("  check   %s on %s: %s", c.Name, c.Artifact, c.State)
		if c.Reason != "" {
			line += " (" + c.Reason + ")"
		}
		b.WriteString(line + "\n")
	}
	for _, p := range s.Publish {
		switch p.Outcome {
		case PublishNotRun, PublishError:
			line := fmt.Sprintf("  publish %s -> %s: %s", p.Name, p.Sink, p.Outcome)
			if p.Error != "" {
				line += " (" + p.Error + ")"
			}
			b.WriteString(line + "\n")
		default:
			fmt.Fprintf(&b, "  publish %s -> %s: %s, token %d, %s\n", p.Name, p.Sink, p.Outcome, p.Token, ShortLabel(p.Version))
			if p.Visible != "" {
				fmt.Fprintf(&b, "          visible at %s\n", p.Visible)
			}
		}
	}
	for _, f := range s.Fenced {
		held := fmt.Sprintf("%s's pointer in %s holds token %d", f.Artifact, f.Sink, f.HeldBy)
		switch f.FencedBy {
		case "grant":
			held = fmt.Sprintf("a newer attempt of %s was granted token %d", f.Task, f.HeldBy)
		case "sink":
			held = fmt.Sprintf("sink %s's own record holds token %d", f.Sink, f.HeldBy)
		}
		fmt.Fprintf(&b, "  fenced  %s: %s attempt %d (token %d) of %s was refused; %s\n",
			f.Publish, f.Task, f.Attempt, f.Token, f.Run, held)
	}
	if s.StoreError != "" {
		fmt.Fprintf(&b, "  store   %s\n", s.StoreError)
	}
	if s.ArtifactsError != "" {
		fmt.Fprintf(&b, "  artifacts %s\n", s.ArtifactsError)
	}
	for _, u := range s.Unreadable {
		fmt.Fprintf(&b, "  output  %s\n", u)
	}
	for _, name := range s.AtLeastOnce {
		fmt.Fprintf(&b, "  note    sink %s has fencing = \"none\": published at-least-once, a stale attempt can overwrite a newer one\n", name)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ShortLabel shortens a version label's digest to 12 hex digits for people:
// "orders_clean@2024-01-01#sha256:5b3fe0a3863c".
func ShortLabel(label string) string {
	i := strings.Index(label, "#sha256:")
	if i < 0 || len(label) < i+len("#sha256:")+12 {
		return label
	}
	return label[:i+len("#sha256:")+12]
}

// StoreFailure describes a failure of the state database for a person: the
// error, what it likely is, and what happens next. what is the failure as
// the run recorded it (a task's error, a step's message): a disk the store
// refused to write to is named by the store's own store.ErrDiskFull, whose
// text the message then carries, never by a driver's wording.
func StoreFailure(what string) string {
	hint := ""
	if strings.Contains(what, store.ErrDiskFull.Error()) {
		hint = " (disk full, a file size limit or a read-only file?)"
	}
	return "the state database failed" + hint + ": " + what +
		"; nothing it did not record was published; run the interval again to resume once the state database is writable"
}

// DiskFailure reports whether err is the store's refusal to write to its
// disk (store.ErrDiskFull: full, over a file size limit, read-only): a
// failure of the store, not a usage error.
func DiskFailure(err error) bool { return errors.Is(err, store.ErrDiskFull) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func marshalPayload(data map[string]any) json.RawMessage {
	b, err := json.Marshal(data)
	if err != nil {
		return nil
	}
	return b
}
