package dispatch_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/proctest"
	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/temporal/dispatch"
)

// The one-runtime guarantees, with Temporal dispatching: the visits are
// runtime.RunVisit, so what a run on pipec's own queue promises holds here.

// A worker SIGKILLed while its non-idempotent task runs: Temporal times
// the visit out (no heartbeat), pipec routes the task to w2, whose visit
// finds the killed attempt unknown and does not charge again: the run
// fails naming pipec resolve. Resolved as failed, a resubmission charges
// once more (the decision was the operator's).
func TestNonIdempotentNeverTwiceOnKill(t *testing.T) {
	e := newEnv(t, scenario.Pay, scenario.PayFiles())
	w1 := e.worker("w1")
	_, run, _ := e.submit("2024-01-01", false, "--heartbeat", "2s")
	pid := e.waitFile("started-w1")
	e.worker("w2")
	w1.Signal(t, syscall.SIGKILL)
	t.Cleanup(func() { killPID(pid) })
	if r := e.until(run); r.State != store.RunFailed {
		t.Fatalf("run %s, want failed", r.State)
	}
	if n := e.lines("ledger", "charge"); n != 1 {
		t.Fatalf("%d charges in the ledger, want 1", n)
	}
	as := e.attempts(run, "charge")
	if len(as) == 0 || as[0].State != store.AttemptUnknown {
		t.Fatalf("charge's attempts %+v (first %s): want the killed one unknown", as, as[0].State)
	}
	for _, a := range as {
		if a.State == store.AttemptSucceeded || a.State == store.AttemptRunning {
			t.Fatalf("charge ran again: %+v", as)
		}
	}
	s := e.status("pay", "2024-01-01")
	var charge, mail string
	for _, ts := range s.Tasks {
		switch ts.Task {
		case "charge":
			charge = ts.State + ": " + ts.Reason
		case "mail":
			mail = ts.State
		}
	}
	if !strings.HasPrefix(charge, queue.WorkFailed) || !strings.Contains(charge, "pipec resolve "+run+" charge") {
		t.Fatalf("charge: %q, want failed naming pipec resolve", charge)
	}
	if mail != queue.WorkNotRun {
		t.Fatalf("mail is %s, want not run", mail)
	}
	e.replay("pay", "2024-01-01", "worker-killed")
	killPID(pid)
	// The operator says the charge did not happen; the next run charges.
	if code, out := e.run(pipecBin, "resolve", run, "charge", "--as", "failed", "--reason", "checked the bank", "--state", e.url); code != 0 {
		t.Fatalf("resolve: exit %d\n%s", code, out)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, out := e.submit("2024-01-01", true); code != 0 || !strings.Contains(out, "run pay/2024-01-01/r2 succeeded") {
		t.Fatalf("resubmit: exit %d\n%s", code, out)
	}
}

func killPID(pid string) {
	var n int
	for _, c := range pid {
		if c < '0' || c > '9' {
			return
		}
		n = n*10 + int(c-'0')
	}
	if n > 0 {
		_ = syscall.Kill(n, syscall.SIGKILL)
	}
}

// Submitting an interval that succeeded again reuses what it made: the
// charge is adopted (not repeated), the consumer reused.
func TestResubmitReuses(t *testing.T) {
	e := newEnv(t, scenario.Pay, scenario.PayFiles())
	e.worker("w2")
	// A third submission too (behind the second's claims, which ran
	// nothing, workers on the state's own queue charged again there).
	for i := range 3 {
		want := fmt.Sprintf("run pay/2024-01-01/r%d succeeded", i+1)
		if code, _, out := e.submit("2024-01-01", true); code != 0 || !strings.Contains(out, want) {
			t.Fatalf("submit %d: exit %d\n%s", i+1, code, out)
		}
	}
	if n := e.lines("ledger", "charge"); n != 1 {
		t.Fatalf("%d charges in the ledger, want 1", n)
	}
	if n := e.lines("mails", "mail"); n != 1 {
		t.Fatalf("mail ran %d times, want once (reused the second and third time)", n)
	}
	// mail's command edited (code_version unchanged): a fourth submission
	// runs it again, and still not the charge.
	path := filepath.Join(e.dir, "pipeline.hcl")
	spec, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(spec), `command = ["./mail.sh"]`) {
		t.Fatalf("the spec lacks mail's command: %v", err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(spec), `command = ["./mail.sh"]`, `command = ["sh", "./mail.sh"]`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, out := e.submit("2024-01-01", true); code != 0 || !strings.Contains(out, "run pay/2024-01-01/r4 succeeded") {
		t.Fatalf("submit 4: exit %d\n%s", code, out)
	}
	if c, m := e.lines("ledger", "charge"), e.lines("mails", "mail"); c != 1 || m != 2 {
		t.Fatalf("%d charges and %d mails, want 1 and 2: mail's command was edited", c, m)
	}
	for _, run := range []string{"pay/2024-01-01/r2", "pay/2024-01-01/r3"} {
		for _, task := range []string{"charge", "mail"} {
			for _, a := range e.attempts(run, task) {
				if a.State == store.AttemptSucceeded || a.State == store.AttemptRunning {
					t.Fatalf("%s ran again in %s: %+v", task, run, a)
				}
			}
		}
	}
}

// A forced submission runs every task again, the charge too, and the one
// after it reuses the forced run's work, as on the state's own queue:
// through pipec submit --force (handed to pipec-temporal's submit) and
// pipec backfill --force --submit, which pipec-temporal runs as pipec's own.
func TestForcedRunOnTemporal(t *testing.T) {
	e := newEnv(t, scenario.Pay, scenario.PayFiles())
	e.worker("w2")
	submit := func(n int, flags ...string) {
		t.Helper()
		want := fmt.Sprintf("run pay/2024-01-01/r%d succeeded", n)
		args := append([]string{"submit", "pipeline.hcl", "--interval", "2024-01-01", "--wait", "--state", e.url, "--engine", e.engine}, flags...)
		if code, out := e.run(pipecBin, args...); code != 0 || !strings.Contains(out, want) {
			t.Fatalf("submit %d %v: exit %d\n%s", n, flags, code, out)
		}
	}
	submit(1)
	submit(2, "--force")
	submit(3)
	if c, m := e.lines("ledger", "charge"), e.lines("mails", "mail"); c != 2 || m != 2 {
		t.Fatalf("%d charges and %d mails, want 2 and 2: the forced run runs both again, the run after it neither", c, m)
	}
	if r, err := e.st.GetRun(context.Background(), "pay/2024-01-01/r2"); err != nil || !r.Forced {
		t.Fatalf("run r2 forced %v (%v), want forced", r.Forced, err)
	}
	code, out := e.run(pipecBin, "backfill", "pipeline.hcl", "--from", "2024-01-01", "--to", "2024-01-01", "--force", "--submit", "--wait",
		"--state", e.url, "--engine", e.engine, "--poll", "20ms")
	if code != 0 || !strings.Contains(out, "backfill: 1 of 1 run(s) succeeded\n") {
		t.Fatalf("backfill --force --submit --wait: exit %d\n%s", code, out)
	}
	if c := e.lines("ledger", "charge"); c != 3 {
		t.Fatalf("%d charges after the forced backfill, want 3", c)
	}
}

// A publish the sink refuses (its folder cannot be made: a file is in the
// way) fails the task and the run, with no failover (it would fail the
// same anywhere); so does a failed check, and nothing is published.
func TestRefusedPublishFailsRun(t *testing.T) {
	t.Run("publish", func(t *testing.T) {
		e := newEnv(t, pairSpec("pair", ""), pairFiles)
		if err := os.WriteFile(filepath.Join(e.dir, "warehouse"), []byte("not a folder"), 0o644); err != nil {
			t.Fatal(err)
		}
		e.worker("w1")
		e.worker("w2")
		code, run, out := e.submit("2024-01-01", true)
		if code == 0 || !strings.Contains(out, "publish") {
			t.Fatalf("submit --wait: exit %d, want a failed run naming the publish\n%s", code, out)
		}
		if r := e.until(run); r.State != store.RunFailed {
			t.Fatalf("run %s, want failed", r.State)
		}
		if as := e.attempts(run, "clean"); len(as) != 1 {
			t.Fatalf("clean's attempts %+v: want one (no failover of a refused publish)", as)
		}
	})
	t.Run("check", func(t *testing.T) {
		spec := strings.Replace(pairSpec("pair", ""), "row_count_min = 1", "row_count_min = 5", 1)
		e := newEnv(t, spec, pairFiles)
		e.worker("w1")
		code, run, out := e.submit("2024-01-01", true)
		if code == 0 || !strings.Contains(out, "check clean_ok") {
			t.Fatalf("submit --wait: exit %d, want a failed run naming the check\n%s", code, out)
		}
		if r := e.until(run); r.State != store.RunFailed {
			t.Fatalf("run %s, want failed", r.State)
		}
		if _, err := os.Stat(filepath.Join(e.dir, "warehouse", "2024-01-01")); err == nil {
			t.Fatalf("something was published")
		}
	})
}

// A run's retry budget spans its visits on Temporal as on pipec's own
// workers: an outage every task meets takes at most the retries the
// budget allows the whole run, whichever worker's activity retries.
func TestRetryBudgetSpansTheRunsVisits(t *testing.T) {
	e := newEnv(t, scenario.Storm(), nil)
	e.worker("w1")
	e.worker("w2")
	code, run, out := e.submit("2024-01-01", true)
	if code == 0 || run != scenario.StormRun {
		t.Fatalf("submit --wait: exit %d, run %q, want a failed %s\n%s", code, run, scenario.StormRun, out)
	}
	if r := e.until(run); r.State != store.RunFailed {
		t.Fatalf("run %s, want failed", r.State)
	}
	as, err := e.st.Attempts(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if err := scenario.CheckStorm(as); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
}

// pipec-temporal cancel RUN cancels the workflow: the running task's process
// is stopped, nothing more starts, the run ends failed in the state. While
// it runs, a second submission of the interval is refused.
func TestCancel(t *testing.T) {
	e := newEnv(t, pairSpec("pair", ""), pairFiles)
	if err := os.WriteFile(filepath.Join(e.dir, "stall-on"), []byte("w1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.worker("w1")
	_, run, _ := e.submit("2024-01-01", false, "--heartbeat", "2s")
	pid := e.waitFile("stalled")
	// One run per interval: the open workflow refuses a second.
	if code, _, out := e.submit("2024-01-01", false); code == 0 || !strings.Contains(out, "workflow "+e.wid("pair", "2024-01-01")+" is open") {
		t.Fatalf("a second submission of the interval: exit %d\n%s", code, out)
	}
	if code, out := e.run(bin, "cancel", run, "--engine", e.engine, "--state", e.url); code != 0 ||
		!strings.Contains(out, "cancelled "+e.wid("pair", "2024-01-01")) {
		t.Fatalf("cancel: exit %d\n%s", code, out)
	}
	if r := e.until(run); r.State != store.RunCancelled || !strings.HasPrefix(r.Cancelled, "by temporal: ") {
		t.Fatalf("run %s (%q), want cancelled by temporal", r.State, r.Cancelled)
	}
	var n int
	for _, c := range pid {
		n = n*10 + int(c-'0')
	}
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(n, 0) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			killPID(pid)
			t.Fatalf("the cancelled task's process %d still runs", n)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "warehouse", "2024-01-01")); err == nil {
		t.Fatalf("something was published")
	}
	s := e.status("pair", "2024-01-01")
	if s.State != store.RunFailed || taskOf(s, "clean").State != queue.WorkNotRun || taskOf(s, "extract").State != queue.WorkSucceeded {
		t.Fatalf("status after cancel: %+v", s)
	}
	e.replay("pair", "2024-01-01", "cancelled")
}

func taskOf(s dispatch.Status, task string) dispatch.TaskStatus {
	for _, ts := range s.Tasks {
		if ts.Task == task {
			return ts
		}
	}
	return dispatch.TaskStatus{}
}

// A worker that cannot reach Temporal stops its tasks as a worker whose
// lease was lost: Temporal gives its visits up after their heartbeat
// timeout, and the worker stops them then (the SDK's deadline on a visit
// whose heartbeats do not get through, or the worker's health check of
// Temporal after --unreachable).
func TestUnreachableTemporalStopsTasks(t *testing.T) {
	e := newEnv(t, pairSpec("pair", ""), pairFiles)
	if err := os.WriteFile(filepath.Join(e.dir, "stall-on"), []byte("w1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w1 := e.worker("w1", "--unreachable", "2s")
	e.submit("2024-01-01", false, "--heartbeat", "2s")
	pid := e.waitFile("stalled")
	e.ts.Stop()
	var n int
	for _, c := range pid {
		n = n*10 + int(c-'0')
	}
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(n, 0) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			killPID(pid)
			t.Fatalf("the task's process %d still runs with Temporal gone:\n%s", n, w1.Output())
		}
	}
	// The SDK's deadline (no heartbeat got through) or the worker's own
	// health check, whichever comes first. The worker says so once the
	// visit is over, which may be a moment after its process is gone.
	said := func(out string) bool {
		return strings.Contains(out, "clean: stopped: Temporal cancelled the visit or could not be reached") || strings.Contains(out, "Temporal unreachable")
	}
	for deadline := time.Now().Add(30 * time.Second); !said(w1.Output()); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("w1 does not say why it stopped its task:\n%s", w1.Output())
		}
	}
}

// An operator terminates a run's workflow (temporal workflow terminate,
// or the web UI) while a task runs: its visit stops with its process, and
// the run stops holding its interval once its lease lapses, so a second
// submission of the interval runs it. The workers renewed the lease for
// as long as they lived before, and the interval could not be submitted
// again ("run … is in progress").
func TestTerminatedWorkflowFreesItsInterval(t *testing.T) {
	e := newEnv(t, pairSpec("pair", ""), pairFiles)
	if err := os.WriteFile(filepath.Join(e.dir, "stall-on"), []byte("w1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w1 := e.worker("w1")
	_, run, _ := e.submit("2024-01-01", false, "--heartbeat", "2s")
	pid := e.waitFile("stalled")
	defer killPID(pid)
	ctx := context.Background()
	if err := e.c.TerminateWorkflow(ctx, e.wid("pair", "2024-01-01"), "", "an operator's"); err != nil {
		t.Fatal(err)
	}
	w1.WaitOutput(t, "clean: stopped", 30*time.Second)
	if err := os.Remove(filepath.Join(e.dir, "stall-on")); err != nil {
		t.Fatal(err)
	}
	var again string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		code, r, out := e.submit("2024-01-01", false)
		if code == 0 && r != "" {
			again = r
			break
		}
		if time.Now().After(deadline) {
			st, _ := e.st.GetRun(ctx, run)
			t.Fatalf("the interval is still held by %s (%s) a minute after its workflow was terminated: exit %d\n%s\nw1:\n%s", run, st.State, code, out, w1.Output())
		}
	}
	if r := e.until(again); r.State != store.RunSucceeded {
		t.Fatalf("run %s after the terminated %s: %s", again, run, r.State)
	}
	// Nobody would end the terminated workflow's run: the new one
	// supersedes it, as a local run takes over one whose pipec stopped.
	if first, err := e.st.GetRun(ctx, run); err != nil || first.State != store.RunFailed {
		t.Fatalf("the terminated run %s: %s, %v; want failed", run, first.State, err)
	}
	if !strings.Contains(w1.Output(), "its workflow "+e.wid("pair", "2024-01-01")+" is terminated, and did not end the run") {
		t.Errorf("w1 did not say why it let the run's lease lapse:\n%s", w1.Output())
	}
}

// A worker SIGKILLed while its task runs, and started again at once under
// its own name (as a supervisor does) with no other worker: the dead
// process's registration is taken over, Temporal times the killed visit
// out, and the task runs again on the new process; the run succeeds, the
// published data the new attempt's.
func TestRestartedUnderOwnName(t *testing.T) {
	e := newEnv(t, holdSpec, holdFiles)
	w1 := e.worker("w1")
	_, run, _ := e.submit("2024-01-01", false, "--heartbeat", "2s")
	pid := e.waitFile("started-w1")
	w1.Signal(t, syscall.SIGKILL)
	killPID(pid) // the task's process, as a machine that restarted
	if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	again := e.worker("w1")
	if r := e.until(run); r.State != store.RunSucceeded {
		t.Fatalf("run %s, want succeeded:\n%s", r.State, again.Output())
	}
	as := e.attempts(run, "load")
	if len(as) != 2 || as[1].State != store.AttemptSucceeded || as[1].Token <= as[0].Token {
		t.Fatalf("load's attempts %+v: want the killed one, then one succeeded with a higher token", as)
	}
	if b, err := os.ReadFile(filepath.Join(e.dir, "warehouse", "2024-01-01", "data.csv")); err != nil || string(b) != "id,worker\n1,w1\n" {
		t.Fatalf("published %q, %v", b, err)
	}
}

// A shared artifact store whose versions of the pipeline another state
// owns (a production state's local run put them there first) is refused
// on Temporal as on pipec's workers: the task fails before its command
// runs, and does not fail over.
func TestRefusesAnotherStatesArtifacts(t *testing.T) {
	e := newEnv(t, strings.Replace(pairSpec("pair", ""), `outputs = ["raw"]`, `outputs = ["raw"]
    failover {
      per_worker = 1
      global     = 3
    }`, 1), pairFiles)
	// Production runs the same spec from its own checkout: its sink is its
	// own, its artifact store the one the workers are given.
	spec, err := os.ReadFile(filepath.Join(e.dir, "pipeline.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	prodDir := filepath.Join(e.dir, "prod")
	if err := os.Mkdir(prodDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"pipeline.hcl": string(spec), "extract.sh": pairFiles["extract.sh"], "clean.sh": pairFiles["clean.sh"]} {
		if err := os.WriteFile(filepath.Join(prodDir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	prod := filepath.Join(prodDir, "state.db")
	if code, out := e.run(pipecBin, "run", filepath.Join("prod", "pipeline.hcl"), "--interval", "2024-01-01", "--state", prod, "--artifacts", e.arts); code != 0 {
		t.Fatalf("the production state's run: exit %d\n%s", code, out)
	}
	w1, w2 := e.worker("w1"), e.worker("w2")
	code, run, out := e.submit("2024-01-02", true)
	if code == 0 || !strings.Contains(out, "holds the versions of pipeline pair for state") {
		t.Fatalf("submit --wait on the second state: exit %d\n%s", code, out)
	}
	if r := e.until(run); r.State != store.RunFailed {
		t.Fatalf("run %s, want failed", r.State)
	}
	if b, err := os.ReadFile(filepath.Join(e.dir, "ran")); err == nil {
		t.Errorf("tasks ran on a store they were refused:\n%s", b)
	}
	if n := strings.Count(w1.Output()+w2.Output(), "extract: start on"); n != 1 {
		t.Errorf("extract was started %d times, want once (no failover)\n%s\n%s", n, w1.Output(), w2.Output())
	}
}

// Two states' workers on one Temporal namespace (staging beside
// production) never take each other's work: a run of one is visited only
// by its own state's workers, even while only the other's are polling, and
// the two states' runs of one interval, and their workflows, stay apart.
// The task queues and workflow IDs were the namespace's: a staging worker
// ran production's workflow, whose local activities wrote production's run
// into the staging state, and production's visits in the staging state.
func TestTwoStatesOneNamespace(t *testing.T) {
	e := newEnv(t, pairSpec("pair", ""), pairFiles)
	staging := filepath.Join(e.dir, "staging", "state.db")
	cmd := exec.Command(bin, "worker", "--engine", e.engine, "--state", staging, "--name", "s1",
		"--workdir", filepath.Join(e.dir, "work-s1"), "--lease", "1s", "--artifacts", filepath.Join(e.dir, "staging"))
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "PIPEC_STATE=", "PIPEC_ENGINE=")
	s1 := registered(t, proctest.Start(t, "s1", cmd, 0))
	_, run, _ := e.submit("2024-01-01", false)
	// Only the staging worker polls, for a while.
	time.Sleep(3 * time.Second)
	w1 := e.worker("w1")
	if r := e.until(run); r.State != store.RunSucceeded {
		t.Fatalf("production's run %s, want succeeded", r.State)
	}
	if strings.Contains(s1.Output(), "pair/") {
		t.Errorf("the staging worker took production's work:\n%s", s1.Output())
	}
	// Staging's run of the same interval, from its own checkout (its sink
	// its own), is its own workflow, visited by its own worker.
	for name, body := range map[string]string{"pipeline.hcl": pairSpec("pair", ""), "extract.sh": pairFiles["extract.sh"], "clean.sh": pairFiles["clean.sh"]} {
		if err := os.WriteFile(filepath.Join(e.dir, "staging", name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	code, out := e.run(bin, "submit", filepath.Join("staging", "pipeline.hcl"), "--interval", "2024-01-01", "--engine", e.engine, "--state", staging, "--wait")
	if strings.Contains(out, "is open") || !strings.Contains(s1.Output(), "pair/2024-01-01/r1 extract: start on s1") {
		t.Errorf("staging's run: exit %d\n%s\nstaging's worker:\n%s", code, out, s1.Output())
	}
	if n := strings.Count(w1.Output(), "start on w1"); n != 2 {
		t.Errorf("production's worker made %d starts, want its run's 2:\n%s", n, w1.Output())
	}
}

// A sink bound to another state (a production state's local run published
// there first) is refused on Temporal as on pipec's workers: the
// non-idempotent charge publishing into it is not run, and does not fail
// over. Before, it charged, and only its receipt's publish was refused. A
// submission made once the sink is bound is refused before anything is
// handed over.
func TestRefusesASinkOfAnotherState(t *testing.T) {
	e := newEnv(t, scenario.LeftOutput, scenario.LeftOutputFiles())
	if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Submitted while the sink was bound to no state: the workers ask it
	// before they run the charge.
	code, run, out := e.submit("2024-01-02", false)
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	prod := filepath.Join(e.dir, "prod", "state.db")
	if code, out := e.run(pipecBin, "run", "pipeline.hcl", "--interval", "2024-01-01", "--state", prod,
		"--artifacts", filepath.Join(e.dir, "prod", "artifacts")); code != 0 {
		t.Fatalf("the production state's run: exit %d\n%s", code, out)
	}
	w1, w2 := e.worker("w1"), e.worker("w2")
	if r := e.until(run); r.State != store.RunFailed {
		t.Fatalf("run %s, want failed", r.State)
	}
	// Submitted once the sink is bound: refused by the submission itself.
	if code, _, out := e.submit("2024-01-03", false); code == 0 || !strings.Contains(out, "sink wh") || !strings.Contains(out, "is bound to state") {
		t.Fatalf("a submission to the sink bound to production: exit %d, want a refusal saying why\n%s", code, out)
	}
	if runs := e.runsOf("pay", "2024-01-03"); len(runs) != 0 {
		t.Errorf("the refused submission recorded runs %+v", runs)
	}
	if n := e.lines("ledger", "charge"); n != 1 {
		t.Errorf("%d charges, want 1 (production's): the refused state's charge ran", n)
	}
	if n := strings.Count(w1.Output()+w2.Output(), "charge: start on"); n != 1 {
		t.Errorf("charge was started %d times, want once (no failover)\n%s\n%s", n, w1.Output(), w2.Output())
	}
}
