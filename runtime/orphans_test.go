package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/spectest"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/retry"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
)

const chargeHCL = `pipeline "pay" {
  task "charge" {
    command    = ["./charge.sh"]
    effects    = ["charge"]
    idempotent = false
  }
}`

// crashedRun leaves a run of pay/2024-01-01 as a pipec killed with -9 leaves
// it: running, with one attempt of charge in the given state.
func crashedRun(t *testing.T, f *fixture, launched bool) store.Attempt {
	t.Helper()
	ctx := context.Background()
	run, err := f.st.CreateRun(ctx, store.NewRun{Pipeline: "pay", Interval: "2024-01-01", CodeVersion: f.plan.CodeVersion})
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Hostname()
	a, err := f.st.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: "charge", Resource: store.FenceResource("pay", "2024-01-01"),
		Host: self, Queued: true})
	if err != nil {
		t.Fatal(err)
	}
	if launched {
		if _, err := f.st.MarkRunningAs(ctx, a.AttemptRef, store.Running{Process: store.Process{Host: self}, Lease: time.Minute,
			Durable: true}); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// An attempt that recorded its launch intent may have charged: the rerun
// does not run the task and says how to settle it.
func TestLaunchedNonIdempotentAttemptStaysUnknown(t *testing.T) {
	f := newFixture(t, chargeHCL, map[string]string{"charge.sh": `echo charge >> ledger`})
	a := crashedRun(t, f, true)
	sum := f.run(f.options("2024-01-01"))
	tr := sum.task("charge")
	if !sum.Failed || tr.State != TaskUnknown || !strings.Contains(tr.Reason, "pipec resolve "+a.Run+" charge --as succeeded|failed") {
		t.Fatalf("charge = %+v\n%s", tr, sum.text())
	}
	if _, err := os.Stat(filepath.Join(f.dir, "ledger")); !os.IsNotExist(err) {
		t.Errorf("the task ran beside an unknown attempt: %v", err)
	}
	got, err := f.st.GetAttempt(context.Background(), a.AttemptRef)
	if err != nil || got.State != store.AttemptUnknown {
		t.Errorf("attempt = %+v, %v", got, err)
	}
	// Resolved as failed, it runs again; then it is not run a third time.
	if _, err := f.st.ResolveAttempt(context.Background(), a.AttemptRef, store.AttemptFailed, "no charge in the ledger", "test"); err != nil {
		t.Fatal(err)
	}
	if sum := f.run(f.options("2024-01-01")); sum.Failed || sum.task("charge").State != TaskSucceeded {
		t.Fatalf("after resolve --as failed:\n%s", sum.text())
	}
	if sum := f.run(f.options("2024-01-01")); sum.Failed || sum.task("charge").State != TaskReused {
		t.Fatalf("third run:\n%s", sum.text())
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "ledger")); string(b) != "charge\n" {
		t.Errorf("ledger = %q", b)
	}
}

// An attempt still queued (no launch intent) never started: the rerun runs
// the task, once.
func TestQueuedNonIdempotentAttemptNeverStarted(t *testing.T) {
	f := newFixture(t, chargeHCL, map[string]string{"charge.sh": `echo charge >> ledger`})
	a := crashedRun(t, f, false)
	sum := f.run(f.options("2024-01-01"))
	if sum.Failed || sum.task("charge").State != TaskSucceeded {
		t.Fatalf("rerun:\n%s", sum.text())
	}
	got, err := f.st.GetAttempt(context.Background(), a.AttemptRef)
	if err != nil || got.State != store.AttemptFailed || !strings.Contains(got.ErrorTail, "never started") {
		t.Errorf("queued attempt = %+v, %v", got, err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "ledger")); string(b) != "charge\n" {
		t.Errorf("ledger = %q", b)
	}
}

// Resolved as succeeded, a non-idempotent task with an output is not run
// again: what its orphan staged is audited and published by the next run.
func TestResolvedSucceededOutputsArePublished(t *testing.T) {
	f := newFixture(t, `pipeline "pay" {
  task "charge" {
    command    = ["./charge.sh"]
    effects    = ["charge"]
    idempotent = false
    outputs    = ["receipts"]
  }
  check "receipts_ok" {
    input         = "receipts"
    row_count_min = 1
  }
  sink "out" {
    type    = "directory"
    path    = "out"
    fencing = "token"
  }
  publish "receipts_pub" {
    artifact = "receipts"
    sink     = "out"
  }
}`, map[string]string{"charge.sh": `echo charge >> ledger; printf 'id\n2\n' > "$PIPEC_OUTPUT_receipts/r.csv"`})
	a := crashedRun(t, f, true)
	// What the orphan wrote before its pipec died.
	staging, err := sink.NewStaging(filepath.Join(f.dir, ".pipec", "staging"), a.Run, "charge", a.Number, "receipts")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(staging, "r.csv"), []byte("id\n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if sum := f.run(f.options("2024-01-01")); !sum.Failed || sum.task("charge").State != TaskUnknown {
		t.Fatalf("before resolve:\n%s", sum.text())
	}
	if _, err := f.st.ResolveAttempt(context.Background(), a.AttemptRef, store.AttemptSucceeded, "the ledger has it", "test"); err != nil {
		t.Fatal(err)
	}
	sum := f.run(f.options("2024-01-01"))
	if sum.Failed || sum.task("charge").State != TaskReused || len(sum.Publish) != 1 || sum.Publish[0].Outcome != "won" {
		t.Fatalf("after resolve:\n%s", sum.text())
	}
	if b, err := os.ReadFile(filepath.Join(f.dir, "out", "2024-01-01", "r.csv")); err != nil || string(b) != "id\n1\n" {
		t.Errorf("published %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "ledger")); !os.IsNotExist(err) {
		t.Errorf("the task ran again: %v", err)
	}
}

// markRefused is a store that refuses one durable start mark, as a state
// server restarting at that moment does.
type markRefused struct {
	store.Store
	refused bool
}

func (s *markRefused) MarkRunningAs(ctx context.Context, ref store.AttemptRef, r store.Running) (store.Attempt, error) {
	if r.Durable && !s.refused {
		s.refused = true
		return store.Attempt{}, errors.New("mark running: terminating connection due to administrator command")
	}
	return s.Store.MarkRunningAs(ctx, ref, r)
}

// A non-idempotent attempt whose start the state could not record never
// started: the task fails as the state's failure (class store, resumed by
// the next run), not as one that "would fail to start again", and the next
// run runs it, once.
func TestStartNotRecordedIsTheStates(t *testing.T) {
	f := newFixture(t, chargeHCL, map[string]string{"charge.sh": `echo charge >> ledger`})
	o := f.options("2024-01-01")
	o.Store = &markRefused{Store: f.st}
	sum := f.run(o)
	tr := sum.task("charge")
	if !sum.Failed || tr.State != TaskFailed || tr.Class != retry.Store || !strings.Contains(tr.Reason, "the next run of the interval resumes") {
		t.Fatalf("charge = %+v\n%s", tr, sum.text())
	}
	if _, err := os.Stat(filepath.Join(f.dir, "ledger")); !os.IsNotExist(err) {
		t.Fatalf("the task ran: %v", err)
	}
	as, err := f.st.TaskAttempts(context.Background(), store.FenceResource("pay", "2024-01-01"), "charge")
	if err != nil || len(as) != 1 || as[0].State != store.AttemptFailed || as[0].Class != queue.ClassNotStarted {
		t.Fatalf("attempts = %+v, %v", as, err)
	}
	if sum := f.run(f.options("2024-01-01")); sum.Failed || sum.task("charge").State != TaskSucceeded {
		t.Fatalf("the next run:\n%s", sum.text())
	}
	if b, err := os.ReadFile(filepath.Join(f.dir, "ledger")); err != nil || string(b) != "charge\n" {
		t.Fatalf("ledger %q, %v: want one charge", b, err)
	}
}

// A visit the state could not record hands its task back only when the
// state could not be reached; a state that refused what was asked would
// refuse the next visit too, and the task fails.
func TestVisitEndedByTheState(t *testing.T) {
	failed := TaskResult{State: TaskFailed, Class: retry.Store, Error: "mark running: broken pipe"}
	got, said := VisitResult{Task: failed, StoreTransient: true}.Ended(nil, "w1")
	if got.Ending != queue.LeaseLost || !strings.Contains(got.Reason, "the state could not record the visit of w1") ||
		!strings.Contains(said, "goes back to the queue") {
		t.Errorf("unreachable: %+v, %q", got, said)
	}
	got, _ = VisitResult{Task: failed}.Ended(nil, "w1")
	if got.Ending != queue.Failed || !strings.HasPrefix(got.Reason, "store: ") {
		t.Errorf("refused: %+v", got)
	}
}

// A failed visit says how its process ended beside the retry's verdict,
// which alone ("the task has no retry policy") says nothing of the
// failure, in the worker's log and in pipec submit --wait.
func TestFailedVisitSaysHowItEnded(t *testing.T) {
	failed := TaskResult{State: TaskFailed, Class: retry.Unclassified, Ending: "exit code 3", Reason: "the task has no retry policy"}
	got, said := VisitResult{Task: failed}.Ended(nil, "w1")
	if want := "unclassified (exit code 3): the task has no retry policy"; got.Reason != want || said != "failed on w1 ("+want+")" {
		t.Errorf("ended %+v, said %q; want %q", got, said, want)
	}
	notStarted := TaskResult{State: TaskFailed, Class: classStart, Ending: "could not start: ./x.sh: no such file or directory",
		Reason: "not retried: it would fail to start again"}
	got, _ = VisitResult{Task: notStarted}.Ended(nil, "w1")
	if want := "could not start: ./x.sh: no such file or directory: not retried: it would fail to start again"; got.Reason != want {
		t.Errorf("ended %+v; want %q", got, want)
	}
}

// lostRecords is a store that has lost what a run recorded, as one whose
// server a crash took back its last commits: the first RecordVersion finds
// no attempt when lostAttempt, and every StartAttempt finds no run when
// lostRun.
type lostRecords struct {
	store.Store
	lostAttempt, lostRun, told bool
}

func (s *lostRecords) RecordVersion(ctx context.Context, v store.Version) (store.Version, error) {
	if s.lostAttempt && !s.told {
		s.told = true
		return store.Version{}, fmt.Errorf("record version: attempt %s#%d: %w", v.Task, v.Attempt, store.ErrNotFound)
	}
	return s.Store.RecordVersion(ctx, v)
}

func (s *lostRecords) StartAttempt(ctx context.Context, spec store.AttemptSpec) (store.Attempt, error) {
	if s.lostRun {
		return store.Attempt{}, fmt.Errorf("run %q: %w", spec.Run, store.ErrNotFound)
	}
	return s.Store.StartAttempt(ctx, spec)
}

// A visit whose attempt the state lost after recording it (a crash of
// PostgreSQL took back its asynchronous commits) is the state's failure:
// the task goes back to its dispatcher, whose next visit records its own.
// On Temporal the task failed, and the run with it ("record version:
// attempt … not found"). A run the state does not have is missing for the
// next visit too: that visit fails its task.
func TestVisitWhoseRecordsTheStateLost(t *testing.T) {
	for _, tc := range []struct {
		name      string
		st        lostRecords
		transient bool
	}{
		{"an attempt", lostRecords{lostAttempt: true}, true},
		{"the run", lostRecords{lostRun: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, spectest.Chain{Pipeline: "p", N: 1}.HCL(), nil)
			run, err := f.st.CreateRun(context.Background(), store.NewRun{Pipeline: "p", Interval: "2024-01-01", CodeVersion: f.plan.CodeVersion})
			if err != nil {
				t.Fatal(err)
			}
			st := tc.st
			st.Store = f.st
			o := f.options("2024-01-01")
			o.Store = &st
			res, err := RunVisit(context.Background(), Visit{Options: o, Run: run.ID, Task: "t0"})
			if err != nil {
				t.Fatal(err)
			}
			got, said := res.Ended(nil, "w1")
			if res.Task.Class != retry.Store || res.StoreTransient != tc.transient ||
				(got.Ending == queue.LeaseLost) != tc.transient {
				t.Fatalf("visit %+v: ended %+v (%q), want transient %v", res, got, said, tc.transient)
			}
		})
	}
}

// endLost is a store whose first end of an attempt finds no attempt, as
// one does once a crash of its server took back the attempt's start.
type endLost struct {
	store.Store
	lost bool
}

func (s *endLost) FinishAttempt(ctx context.Context, ref store.AttemptRef, o store.Outcome) error {
	if !s.lost {
		s.lost = true
		return fmt.Errorf("attempt %s: %w", ref, store.ErrNotFound)
	}
	return s.Store.FinishAttempt(ctx, ref, o)
}

// A local run whose attempt the state lost (its end finds none) runs the
// task again under a new attempt, as after a lost lease, and succeeds; it
// failed before (class store, "not retried").
func TestLocalAttemptTheStateLost(t *testing.T) {
	f := newFixture(t, spectest.Chain{Pipeline: "p", N: 1}.HCL(), nil)
	o := f.options("2024-01-01")
	st := &endLost{Store: f.st}
	o.Store = st
	sum := f.run(o)
	if tr := sum.task("t0"); !st.lost || sum.Failed || tr.State != TaskSucceeded || tr.Attempts != 2 {
		t.Fatalf("lost %v, t0 %+v:\n%s", st.lost, tr, sum.text())
	}
}

// A local run whose attempt the state lost between its end and its
// version's record (RecordVersion finds no attempt) runs the task again
// too: nothing of the lost attempt was accepted or published.
func TestLocalAttemptLostBeforeItsVersion(t *testing.T) {
	f := newFixture(t, spectest.Chain{Pipeline: "p", N: 1}.HCL(), nil)
	o := f.options("2024-01-01")
	st := &lostRecords{lostAttempt: true, Store: f.st}
	o.Store = st
	sum := f.run(o)
	if tr := sum.task("t0"); !st.told || sum.Failed || tr.State != TaskSucceeded || tr.Attempts != 2 ||
		len(sum.Publish) != 1 || sum.Publish[0].Outcome != "won" {
		t.Fatalf("lost %v, t0 %+v:\n%s", st.told, tr, sum.text())
	}
}

// A forced run reuses nothing from earlier runs, but a visit of it adopts
// what an earlier visit of the same run did: Temporal visits a task again
// when its worker died after recording the attempt's end and before
// reporting it. Forcing each visit alike charged twice.
func TestForcedRunVisitedAgain(t *testing.T) {
	f := newFixture(t, `pipeline "p" {
  task "charge" {
    command    = ["sh", "-c", "echo charged >> ledger"]
    effects    = ["charge"]
    idempotent = false
  }
}
`, nil)
	ctx := context.Background()
	charges := func() int {
		b, _ := os.ReadFile(filepath.Join(f.dir, "ledger"))
		return strings.Count(string(b), "charged")
	}
	if sum := f.run(f.options("2024-01-01")); sum.Failed || charges() != 1 {
		t.Fatalf("first run: %d charges\n%s", charges(), sum.text())
	}
	run, err := f.st.CreateRun(ctx, store.NewRun{Pipeline: "p", Interval: "2024-01-01", CodeVersion: f.plan.CodeVersion, Forced: true})
	if err != nil {
		t.Fatal(err)
	}
	o := f.options("2024-01-01")
	o.Force = true
	for visit := 1; visit <= 2; visit++ {
		res, err := RunVisit(ctx, Visit{Options: o, Run: run.ID, Task: "charge", AttemptBase: visit - 1})
		if err != nil {
			t.Fatal(err)
		}
		if res.End != nil { // recorded as Temporal's activity records it
			if err := f.st.FinishAttempt(ctx, res.End.Ref, res.End.Outcome); err != nil {
				t.Fatal(err)
			}
		}
		want := map[int]string{1: TaskSucceeded, 2: TaskReused}[visit]
		if res.Task.State != want || charges() != 2 {
			t.Fatalf("visit %d of the forced run: %s (%s), %d charges; want %s and 2 charges", visit, res.Task.State,
				res.Task.Reason, charges(), want)
		}
	}
}

// startLost is a store whose first durable record of a launch (a
// non-idempotent task's, made before its process starts) finds no
// attempt, as once a crash of its server took back the attempt's start.
type startLost struct {
	store.Store
	lost bool
}

func (s *startLost) MarkRunningAs(ctx context.Context, ref store.AttemptRef, run store.Running) (store.Attempt, error) {
	if run.Durable && !s.lost {
		s.lost = true
		return store.Attempt{}, fmt.Errorf("mark running: attempt %s: %w", ref, store.ErrNotFound)
	}
	return s.Store.MarkRunningAs(ctx, ref, run)
}

// A local run whose non-idempotent task's start the state lost before
// the launch was recorded (nothing ran) starts the task under a new
// attempt and succeeds, charging once. It failed before (class store,
// "mark running: … not found"), as TestRunRidesOutCrashes (cli) did now
// and then on PostgreSQL.
func TestLocalStartTheStateLost(t *testing.T) {
	f := newFixture(t, spectest.Chain{Pipeline: "p", N: 2, Charging: true}.HCL(), nil)
	o := f.options("2024-01-01")
	st := &startLost{Store: f.st}
	o.Store = st
	sum := f.run(o)
	if tr := sum.task("t1"); !st.lost || sum.Failed || tr.State != TaskSucceeded || tr.Attempts != 2 {
		t.Fatalf("lost %v, t1 %+v:\n%s", st.lost, tr, sum.text())
	}
}
