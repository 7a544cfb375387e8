package worker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pipec/pipec/internal/pgtest"
	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/internal/spectest"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// The promises of a local run, kept by the workers too (issue 14): each
// test failed before the worker's visit went through the runtime's one
// decision of what a task's earlier attempts allow (runtime/prior.go).

func (e *env) lines(name, prefix string) int {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, name))
	if err != nil && !os.IsNotExist(err) {
		e.t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// Defect 1: a worker stopped (SIGTERM) while its non-idempotent task ran
// hands the task back, but another worker does not charge again: the
// stopped attempt is unknown, the run fails and names pipec resolve.
func TestNonIdempotentNotRunTwice(t *testing.T) { onBoth(t, testNonIdempotentNotRunTwice) }

func testNonIdempotentNotRunTwice(t *testing.T, b backend) {
	e := newEnvOn(t, b, scenario.Pay, scenario.PayFiles())
	w1 := e.worker("w1")
	run := e.submit("2024-01-01")
	e.waitFile("started-w1")
	e.worker("w2")
	w1.Signal(t, syscall.SIGTERM)
	rs := e.until(run, "the run to end", finished)
	if rs.Run.State != store.RunFailed {
		t.Fatalf("run %s, want failed: %+v", rs.Run.State, rs.Tasks)
	}
	if n := e.lines("ledger", "charge"); n != 1 {
		t.Fatalf("%d charges in the ledger, want 1", n)
	}
	if st := taskState(rs, "charge"); st != queue.WorkFailed {
		t.Fatalf("charge is %s, want failed", st)
	}
	for _, ts := range rs.Tasks {
		if ts.Task == "charge" && !strings.Contains(ts.Reason, "pipec resolve "+run+" charge") {
			t.Fatalf("charge's reason does not say how to settle it: %q", ts.Reason)
		}
	}
	as := e.attempts(run, "charge")
	if len(as) == 0 || as[0].State != store.AttemptUnknown {
		t.Fatalf("charge's attempts %+v: want the stopped one unknown", as)
	}
}

// Defect 2: submitting an interval that succeeded again reuses what it
// made: the charge is not repeated (adopted), the idempotent consumer is
// reused, nothing runs.
func TestResubmitReuses(t *testing.T) { onBoth(t, testResubmitReuses) }

func testResubmitReuses(t *testing.T, b backend) {
	e := newEnvOn(t, b, scenario.Pay, scenario.PayFiles())
	e.worker("w2")
	for i, want := range []string{"run pay/2024-01-01/r1 succeeded", "run pay/2024-01-01/r2 succeeded"} {
		code, out := e.pipec("submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "20ms")
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("submit %d: exit %d\n%s", i+1, code, out)
		}
	}
	if n := e.lines("ledger", "charge"); n != 1 {
		t.Fatalf("%d charges in the ledger, want 1", n)
	}
	if n := e.lines("mails", "mail"); n != 1 {
		t.Fatalf("mail ran %d times, want once (reused the second time)", n)
	}
	for _, task := range []string{"charge", "mail"} {
		for _, a := range e.attempts("pay/2024-01-01/r2", task) {
			if a.State == store.AttemptSucceeded || a.State == store.AttemptRunning {
				t.Fatalf("%s ran again in r2: %+v", task, a)
			}
		}
	}
	if e.events("pay/2024-01-01/r2", "task.adopted", "charge") != 1 || e.events("pay/2024-01-01/r2", "task.reused", "mail") != 1 {
		t.Fatalf("r2 does not say charge was adopted and mail reused")
	}
}

// Defect 3: a check that fails on a worker fails the task and the run;
// submit --wait says so and exits non-zero, and nothing is published.
func TestFailedCheckFailsSubmittedRun(t *testing.T) { onBoth(t, testFailedCheckFailsSubmittedRun) }

func testFailedCheckFailsSubmittedRun(t *testing.T, b backend) {
	spec := strings.Replace(dagSpec, "row_count_min = 1", "row_count_min = 5", 1)
	e := newEnvOn(t, b, spec, dagFiles)
	e.worker("w1")
	code, out := e.pipec("submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "20ms")
	if code == 0 || !strings.Contains(out, "failed") || strings.Contains(out, "dag/2024-01-01/r1 succeeded") {
		t.Fatalf("submit --wait: exit %d, want a failed run\n%s", code, out)
	}
	rs := e.until("dag/2024-01-01/r1", "the run", finished)
	if rs.Run.State != store.RunFailed {
		t.Fatalf("run %s, want failed", rs.Run.State)
	}
	for _, ts := range rs.Tasks {
		if ts.Task == "clean" && (ts.State != queue.WorkFailed || !strings.Contains(ts.Reason, "check clean_ok")) {
			t.Fatalf("clean: %s (%s), want failed naming the check", ts.State, ts.Reason)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "warehouse", "2024-01-01")); err == nil {
		t.Fatalf("something was published")
	}
}

// Defect 4: the only worker, paused past its lease and resumed, loses its
// lease, not the task: the task starts again (on it, as nobody else is
// live) and the run succeeds.
//
// On PostgreSQL only, as TestSIGSTOPGrayFailure (a worker stopped inside
// an SQLite write transaction holds the file's lock until it resumes).
func TestPausedWorkerLosesLeaseNotTask(t *testing.T) {
	e := newEnv(t, holdSpec(""), map[string]string{"hold.sh": `#!/bin/sh
if [ "$PIPEC_ATTEMPT" = 1 ]; then
  touch started-w1
  while :; do sleep 0.05; done
fi
printf 'id,worker\n1,%s\n' "$PIPEC_WORKER" > "$PIPEC_OUTPUT_out/data.csv"
`})
	w1 := e.worker("w1")
	run := e.submit("2024-01-01")
	e.waitFile("started-w1")
	w1.Signal(t, syscall.SIGSTOP)
	time.Sleep(3 * time.Second) // three leases
	w1.Signal(t, syscall.SIGCONT)
	rs := e.until(run, "the run to end", finished)
	if rs.Run.State != store.RunSucceeded {
		t.Fatalf("run %s, want succeeded: %+v\n%s", rs.Run.State, rs.Tasks, w1.Output())
	}
	if got := e.published(); got != "id,worker\n1,w1\n" {
		t.Fatalf("published %q", got)
	}
}

// Defect 5: a worker killed mid-task and started again under its own name
// (as a supervisor does) does not hang the run: its dead process's
// registration and claims are taken over, and the task runs again.
func TestRestartedUnderOwnName(t *testing.T) { onBoth(t, testRestartedUnderOwnName) }

func testRestartedUnderOwnName(t *testing.T, b backend) {
	e := newEnvOn(t, b, holdSpec(""), holdFiles)
	t.Cleanup(e.killTask)
	w1 := e.worker("w1")
	run := e.submit("2024-01-01")
	e.waitFile("started-w1")
	w1.Signal(t, syscall.SIGKILL)
	if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	again := e.worker("w1")
	rs := e.until(run, "the run to end", finished)
	if rs.Run.State != store.RunSucceeded {
		t.Fatalf("run %s, want succeeded: %+v\n%s", rs.Run.State, rs.Tasks, again.Output())
	}
	if as := e.attempts(run, "load"); len(as) < 2 {
		t.Fatalf("attempts %+v: want the killed one and its relaunch", as)
	}
}

// pipec cancel of a run handed to workers: the run is cancelled at once,
// its worker stops the running task at its next heartbeat, nothing is
// published, and the interval can be submitted again.
func TestCancelSubmittedRun(t *testing.T) { onBoth(t, testCancelSubmittedRun) }

func testCancelSubmittedRun(t *testing.T, b backend) {
	e := newEnvOn(t, b, holdSpec(""), holdFiles)
	t.Cleanup(e.killTask)
	w1 := e.worker("w1")
	run := e.submit("2024-01-01")
	e.waitFile("started-w1")
	code, out := e.pipec("cancel", run, "--state", e.url, "--reason", "wrong input")
	if code != 0 || !strings.Contains(out, "cancelled "+run+" by ") {
		t.Fatalf("cancel: exit %d\n%s", code, out)
	}
	rs := e.until(run, "the run to be cancelled", finished)
	if rs.Run.State != store.RunCancelled || !strings.HasSuffix(rs.Run.Cancelled, ": wrong input") {
		t.Fatalf("run %s (%q), want cancelled", rs.Run.State, rs.Run.Cancelled)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(w1.Output(), "stopping it") {
		if time.Now().After(deadline) {
			t.Fatalf("w1 did not stop the task:\n%s", w1.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Said as what it is, in the worker's log and the attempt's record,
	// not as a takeover: the task's process was stopped for the cancel.
	if want := ": its run was cancelled " + rs.Run.Cancelled + "; stopping it"; !strings.Contains(w1.Output(), want) {
		t.Errorf("w1 does not say %q:\n%s", want, w1.Output())
	}
	e.until(run, "the attempt's end", func(queue.RunStatus) bool {
		as := e.attempts(run, "load")
		return len(as) == 1 && as[0].State.Finished()
	})
	if as := e.attempts(run, "load"); !strings.Contains(as[0].ErrorTail, "was stopped: its run was cancelled "+rs.Run.Cancelled) {
		t.Errorf("load's attempt %+v does not say it was stopped for the cancel", as[0])
	}
	if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	next := e.submit("2024-01-01")
	if rs := e.until(next, "the next run", finished); rs.Run.State != store.RunSucceeded {
		t.Fatalf("the next run %s", rs.Run.State)
	}
	if n := e.events(run, "publish.won", "load"); n != 0 {
		t.Fatalf("the cancelled run published")
	}
}

// chainSpec is n tasks in a chain, each a short sleep: a run long enough
// for the state to go away under it.
func chainSpec(n int) string {
	var b strings.Builder
	b.WriteString("pipeline \"chain\" {\n  code_version = \"v1\"\n  schedule {\n    every = \"24h\"\n    start = \"2024-01-01T00:00:00Z\"\n  }\n")
	for i := range n {
		fmt.Fprintf(&b, "  task \"t%d\" {\n    command = [\"sleep\", \"0.3\"]\n", i)
		if i > 0 {
			fmt.Fprintf(&b, "    depends_on = [\"t%d\"]\n", i-1)
		}
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// everyOtherCharges makes every other task of chainSpec(n)'s spec not
// idempotent (t1, t3, …).
func everyOtherCharges(spec string, n int) string {
	for i := 1; i < n; i += 2 {
		task := fmt.Sprintf("task \"t%d\" {\n", i)
		spec = strings.Replace(spec, task, task+"    idempotent = false\n", 1)
	}
	return spec
}

// Defect 6: PostgreSQL restarted mid-run, down for longer than the
// workers' lease: the workers stop the tasks they held (their leases are
// gone), stay up, and go on once it is back; submit --wait rides it out;
// the run succeeds.
func TestStoreRestartMidRun(t *testing.T) {
	srv := pgtest.Start(t)
	e := newEnvAt(t, srv.NewSchema(t), chainSpec(8), nil)
	w1, w2 := e.worker("w1"), e.worker("w2")
	follow := e.started("submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "50ms")
	for deadline := time.Now().Add(time.Minute); !strings.Contains(follow.Output(), "t2: start"); {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not get going:\n%s", follow.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := srv.Restart(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	follow.WaitExit(t, 3*time.Minute)
	if follow.Err != nil || !strings.Contains(follow.Output(), "run chain/2024-01-01/r1 succeeded") {
		t.Fatalf("submit --wait: %v\n%s\nw1:\n%s\nw2:\n%s", follow.Err, follow.Output(), w1.Output(), w2.Output())
	}
	for _, w := range []*proc{w1, w2} {
		select {
		case <-w.Done:
			t.Fatalf("worker %s exited: %v\n%s", w.Name, w.Err, w.Output())
		default:
		}
		if n := strings.Count(w.Output(), "the store is unreachable"); n > 1 {
			t.Errorf("worker %s said the store is unreachable %d times, want at most once:\n%s", w.Name, n, w.Output())
		}
	}
}

// Defect 6, the other half: a worker started while its PostgreSQL server
// is down (a supervisor restarting everything at once) waits for it,
// saying so once, instead of exiting with a usage error; so does a pipec
// submit started then (cron beside a database restarting), which failed
// at once where pipec run waited.
func TestWorkerStartsWhileStoreDown(t *testing.T) {
	srv := pgtest.Start(t)
	e := newEnvAt(t, srv.NewSchema(t), dagSpec, dagFiles)
	restarted := make(chan error, 1)
	go func() { restarted <- srv.Restart(3 * time.Second) }()
	time.Sleep(500 * time.Millisecond) // down now
	submit := e.started("submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "20ms")
	w1 := e.worker("w1")
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	submit.WaitExit(t, 2*time.Minute)
	if submit.Err != nil || !strings.Contains(submit.Output(), "run dag/2024-01-01/r1 succeeded") {
		t.Fatalf("submit --wait: %v\n%s", submit.Err, submit.Output())
	}
	for _, p := range []*proc{w1, submit} {
		if n := strings.Count(p.Output(), "trying again"); n != 1 {
			t.Errorf("%s said it waits for the state %d times, want once:\n%s", p.Name, n, p.Output())
		}
	}
}

// A PostgreSQL server that stops answering, its connections open (every
// process of it stopped: a hung server, or a network that drops packets),
// holds no worker up: the worker says the store is unreachable, stops its
// task once a lease passed, and stops when told to, within a few leases;
// submit --wait says the state does not answer; once the server answers
// again another worker finishes the run. Told to stop as its task's
// visit ends, or once that visit's end failed (the store did not take it),
// the worker says alike that it did not hand the task back: it said it
// handed back none, and stopped, in the second case.
func TestStoreStopsAnswering(t *testing.T) {
	t.Run("stopped as its visit ends", func(t *testing.T) { testStoreStopsAnswering(t, false) })
	t.Run("stopped once its end failed", func(t *testing.T) { testStoreStopsAnswering(t, true) })
}

func testStoreStopsAnswering(t *testing.T, endFailed bool) {
	srv := pgtest.Start(t)
	e := newEnvAt(t, srv.NewSchema(t), `pipeline "hang" {
  code_version = "v1"
  task "long" {
    command = ["sleep", "3"]
  }
}
`, nil)
	w1 := e.worker("w1")
	follow := e.started("submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "50ms")
	w1.WaitOutput(t, "long: start", time.Minute)
	thaw := srv.Frozen(t)
	// The worker's lease is 1s (env.worker).
	w1.WaitOutput(t, "the store is unreachable", 30*time.Second)
	w1.WaitOutput(t, "the store was unreachable for longer than the lease; stopping it", 30*time.Second)
	if endFailed {
		w1.WaitOutput(t, "long: finish: ", 30*time.Second)
	}
	w1.Signal(t, syscall.SIGTERM) // fails the test unless w1 exits
	if !strings.Contains(w1.Output(), "stopped without handing its tasks back") {
		t.Fatalf("w1 did not say it stopped without handing its task back:\n%s", w1.Output())
	}
	// The follower, too, says that the state does not answer.
	follow.WaitOutput(t, "the state does not answer", 30*time.Second)
	thaw()
	e.worker("w2")
	follow.WaitExit(t, time.Minute)
	if follow.Err != nil || !strings.Contains(follow.Output(), "run hang/2024-01-01/r1 succeeded") {
		t.Fatalf("submit --wait: %v\n%s", follow.Err, follow.Output())
	}
}

// A backfill handed to the workers and followed (backfill --submit --wait)
// rides out a PostgreSQL restart as submit --wait does: its intervals'
// runs go on with the workers, and the follower says the state does not
// answer, then follows them to their end.
func TestBackfillFollowsThroughRestart(t *testing.T) {
	srv := pgtest.Start(t)
	e := newEnvAt(t, srv.NewSchema(t), chainSpec(6), nil)
	e.worker("w1")
	e.worker("w2")
	follow := e.started("backfill", "pipeline.hcl", "--from", "2024-01-01", "--to", "2024-01-02", "--state", e.url,
		"--submit", "--wait", "--poll", "50ms")
	follow.WaitOutput(t, "submitted chain/2024-01-02/r1", time.Minute)
	if err := srv.Restart(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	follow.WaitExit(t, 3*time.Minute)
	if follow.Err != nil || strings.Count(follow.Output(), "/r1 succeeded") != 2 {
		t.Fatalf("backfill --submit --wait: %v\n%s", follow.Err, follow.Output())
	}
	for _, said := range []string{"2024-01-02  the state does not answer", "2024-01-02  the state answers again"} {
		if !strings.Contains(follow.Output(), said) {
			t.Errorf("the follower did not say %q:\n%s", said, follow.Output())
		}
	}
	t.Logf("backfill --submit --wait:\n%s", follow.Output())
}

// PostgreSQL restarted again and again for a moment while a run goes on
// (each outage far shorter than a lease): a visit whose attempt the state
// could not record is the worker's failure, not the task's, and its task
// goes back to the queue; the run succeeds. (It failed the run on the
// first blip that hit an attempt's start: "not retried", or for a
// non-idempotent task, whose start is recorded before its process starts,
// "class start: it would fail to start again".) Every other task of the
// chain is not idempotent. Each task's output is recorded, audited and
// published: a visit's writes wait for the state while it refuses
// connections, as a local run's do; they failed at once before, and the
// task, the run with it, as if its check had failed (3 runs of 3).
func TestStoreBlipsMidRun(t *testing.T) {
	srv := pgtest.Start(t)
	spec := spectest.Chain{Pipeline: "chain", N: 12, CodeVersion: "v1", Charging: true, Fenced: true, After: "sleep 0.3"}.HCL()
	e := newEnvAt(t, srv.NewSchema(t), spec, nil)
	w1, w2 := e.worker("w1"), e.worker("w2")
	follow := e.started("submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "50ms")
	follow.WaitOutput(t, "t1: start", time.Minute)
	for range 6 {
		if err := srv.Restart(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(350 * time.Millisecond)
	}
	follow.WaitExit(t, 3*time.Minute)
	if follow.Err != nil || !strings.Contains(follow.Output(), "run chain/2024-01-01/r1 succeeded") {
		t.Fatalf("submit --wait: %v\n%s\nw1:\n%s\nw2:\n%s", follow.Err, follow.Output(), w1.Output(), w2.Output())
	}
	t.Logf("submit --wait:\n%s", follow.Output())
}

// PostgreSQL crashes (immediate shutdown, then crash recovery, which takes
// back the last asynchronous commits) four times, 300 ms apart, while two
// workers run a chain whose tasks' outputs are recorded, audited and
// published, every other task charging: the run succeeds, and each charge
// is made once. A crash between a version's record and its acceptance
// took the record back, and the acceptance failed the task ("version N:
// not found"); one after the acceptance took that back, and the publish
// failed it. The acceptance is now a synchronous commit, and a version
// the crash took back is recorded again (2 runs of 18 failed before, 0 of
// 24 after).
func TestStoreCrashesMidRun(t *testing.T) {
	srv := pgtest.Start(t)
	charges := filepath.Join(t.TempDir(), "charges")
	spec := spectest.Chain{Pipeline: "chain", N: 10, CodeVersion: "v1", Charging: true, Fenced: true,
		Before: "echo $PIPEC_TASK >> " + charges, After: "sleep 0.1"}.HCL()
	e := newEnvAt(t, srv.NewSchema(t), spec, nil)
	w1, w2 := e.worker("w1"), e.worker("w2")
	follow := e.started("submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "50ms")
	follow.WaitOutput(t, "t0: start", time.Minute)
	for range 4 {
		time.Sleep(300 * time.Millisecond)
		if err := srv.Crash(); err != nil {
			t.Fatal(err)
		}
	}
	follow.WaitExit(t, 3*time.Minute)
	ran := ranTasks(t, charges)
	if twice := spectest.NotChargedOnce(ran, 10); len(twice) > 0 || follow.Err != nil || !strings.Contains(follow.Output(), "run chain/2024-01-01/r1 succeeded") {
		t.Fatalf("tasks ran %v (charging, not run once: %v); submit --wait: %v\n%s\nw1:\n%s\nw2:\n%s",
			ran, twice, follow.Err, follow.Output(), w1.Output(), w2.Output())
	}
	t.Logf("ran %v", ran)
}

// ranTasks is what the tasks of a chain that each wrote their name to
// charges ($PIPEC_TASK) wrote there, in order.
func ranTasks(t *testing.T, charges string) []string {
	t.Helper()
	got, err := os.ReadFile(charges)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(got))
}

// PostgreSQL crashes (immediate shutdown, then crash recovery, which takes
// back the last asynchronous commits) the moment each task starts, in a
// chain through two workers: the run succeeds.
//   - charging: every other task is not idempotent, and charged once. Its
//     start and its end are synchronous commits, which no crash takes back
//     (its start was asynchronous before, and a start taken back was run
//     again; an end taken back left an unknown for a person to settle).
//     A visit whose start the crash kept it from recording goes on writing
//     it while its task runs (it stopped the task: an unknown again).
//   - idempotent: a crash takes back ends, and the claims they ended; a
//     worker hands back a claim the store says it holds and no visit of it
//     runs, which held its task (and the run) for as long as the worker
//     lived. Tasks may run again.
func TestStoreCrashesAtStarts(t *testing.T) {
	for _, charging := range []bool{true, false} {
		t.Run(map[bool]string{true: "charging", false: "idempotent"}[charging], func(t *testing.T) {
			testStoreCrashesAtStarts(t, charging)
		})
	}
}

func testStoreCrashesAtStarts(t *testing.T, charging bool) {
	srv := pgtest.Start(t)
	charges := filepath.Join(t.TempDir(), "charges")
	const n = 6
	spec := strings.ReplaceAll(chainSpec(n), `["sleep", "0.3"]`, `["sh", "-c", "echo $PIPEC_TASK >> `+charges+`; sleep 0.3"]`)
	if charging {
		spec = everyOtherCharges(spec, n)
	}
	e := newEnvAt(t, srv.NewSchema(t), spec, nil)
	w1, w2 := e.worker("w1"), e.worker("w2")
	follow := e.started("submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "50ms")
	for i := range n {
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			if got, _ := os.ReadFile(charges); strings.Contains(string(got), fmt.Sprintf("t%d\n", i)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("t%d did not start:\n%s", i, follow.Output())
			}
		}
		if err := srv.Crash(); err != nil {
			t.Fatal(err)
		}
	}
	follow.WaitExit(t, 3*time.Minute)
	ran := ranTasks(t, charges)
	once := !charging || len(spectest.NotChargedOnce(ran, n)) == 0
	if !once || follow.Err != nil || !strings.Contains(follow.Output(), "run chain/2024-01-01/r1 succeeded") {
		t.Fatalf("tasks ran %v, want each charging one once; submit --wait: %v\n%s\nw1:\n%s\nw2:\n%s",
			ran, follow.Err, follow.Output(), w1.Output(), w2.Output())
	}
	t.Logf("ran %v", ran)
}

// Claims that fail while heartbeats pass (a server with no connection left
// for a worker's next one, as six workers of two slots found on a server
// of 12 connections; here the server refuses every claim for 2 seconds):
// the worker says so once, and once when a claim goes through again, where
// it said it at every turn of its loop, five times a second here; the run
// then succeeds.
func TestClaimsRefusedForAWhile(t *testing.T) {
	e := newEnvOn(t, onPostgres, chainSpec(2), nil)
	w := e.worker("w1")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE FUNCTION refuse_claims() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.state = 'claimed' THEN RAISE EXCEPTION 'claims refused by the test'; END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER refuse_claims BEFORE UPDATE ON work FOR EACH ROW EXECUTE FUNCTION refuse_claims()`); err != nil {
		t.Fatal(err)
	}
	run := e.submit("2024-01-01")
	w.WaitOutput(t, "claims refused by the test", 30*time.Second)
	time.Sleep(2 * time.Second)
	if _, err := conn.Exec(ctx, `DROP TRIGGER refuse_claims ON work`); err != nil {
		t.Fatal(err)
	}
	if rs := e.until(run, "the run", finished); rs.Run.State != store.RunSucceeded {
		t.Fatalf("run %s, want succeeded", rs.Run.State)
	}
	out := w.Output()
	if n := strings.Count(out, "claims refused by the test"); n != 1 || strings.Count(out, "claims go through again") != 1 {
		t.Errorf("the worker said the refused claims %d times, want once, and once that claims go through again:\n%s", n, out)
	}
}
