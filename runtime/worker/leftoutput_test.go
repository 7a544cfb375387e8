package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pipec/pipec/internal/s3test"
	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/store"
)

// A worker stopped while it audits a non-idempotent task's output (a
// shutdown, a machine going away) leaves the output for the next visit,
// and the task is not run again: the next visit audits the output and
// publishes it, and the run succeeds with one charge, whether that visit is
// the same worker's, back under its own name, or another worker's that
// never saw the first one's folder.
//
// Before, the worker back under its name audited the receipt and then
// published it with the token of the charge's first attempt, which the
// token its own claim had just been granted fenced: the run succeeded with
// nothing published. Another worker could not audit it at all: the output
// stayed in the first worker's --workdir, "not staged any more", and the
// run failed until that worker came back or --force charged again. Now the
// output goes into the shared artifact store before its audit, any visit
// audits it from there, and a visit that completes its task from an
// earlier attempt ends its claim's unstarted attempt before it publishes.
//
// With the artifact store on S3 (versitygw) and no folder shared at all,
// the other worker downloads the version to audit it.
func TestLeftOutputAuditedByTheNextVisit(t *testing.T) {
	onBoth(t, func(t *testing.T, b backend) {
		cases := []string{"w1", "w2"}
		if b == onPostgres { // workers sharing an SQLite file share a folder
			cases = append(cases, "w2 from S3")
		}
		for _, next := range cases {
			t.Run("on "+next, func(t *testing.T) {
				next, onS3 := strings.CutSuffix(next, " from S3")
				var srv *s3test.Server
				if onS3 {
					srv = s3test.Start(t, "arts")
				}
				e := newEnvOn(t, b, scenario.LeftOutput, scenario.LeftOutputFiles())
				if onS3 {
					if err := os.Remove(e.arts); err != nil {
						t.Fatal(err)
					}
					e.arts = "s3://arts/pay"
				}
				w1 := e.worker("w1")
				run := e.submit("2024-01-01")
				e.waitFile("auditing")
				w1.Signal(t, syscall.SIGTERM)
				if next != "w1" {
					// The first worker's folder is gone with its machine.
					if err := os.RemoveAll(filepath.Join(e.dir, "work-w1")); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
				e.succeeds(t, run, e.worker(next))
				e.chargedOnce(t, "w1")
				if n := e.lines("audits", "audit"); n != 2 {
					t.Errorf("%d audits, want 2 (the stopped one, and the next visit's)", n)
				}
				if srv != nil {
					v, err := e.st.AcceptedVersion(context.Background(), "pay", "receipt", "2024-01-01")
					if err != nil {
						t.Fatal(err)
					}
					if ok, err := srv.Client().Exists(context.Background(), "arts", "pay/"+v.Location+"/data.csv"); err != nil || !ok {
						t.Errorf("the receipt is not in the S3 store: %v, %v", ok, err)
					}
				}
			})
		}
	})
}

// A worker stopped (SIGTERM: a scale-down, a deploy) once a non-idempotent
// task's process has exited, before its output went into the shared
// artifact store, still puts the output there and records it before it
// hands the task back: the charge happened, and the next visit, on a
// worker that never saw the first one's folder, audits and publishes its
// receipt. Before, the stop cut the put short and the output stayed in the
// stopped worker's --workdir: the next visit failed the run ("not staged
// any more"), and only --force (a second charge) got the interval
// published. With the artifact store on S3 (versitygw) too.
func TestStoppedOnceTheChargeExited(t *testing.T) {
	onBoth(t, func(t *testing.T, b backend) {
		cases := []string{"a shared folder"}
		if b == onPostgres {
			cases = append(cases, "S3")
		}
		for _, arts := range cases {
			t.Run(arts, func(t *testing.T) {
				e := newEnvOn(t, b, scenario.LeftOutput, scenario.LeftOutputFiles())
				if arts == "S3" {
					s3test.Start(t, "arts")
					if err := os.Remove(e.arts); err != nil {
						t.Fatal(err)
					}
					e.arts = "s3://arts/pay"
				}
				if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
				w1 := e.hookedWorker(t, "w1", "after-exit:charge:term")
				run := e.submit("2024-01-01")
				<-w1.Done
				if err := os.RemoveAll(filepath.Join(e.dir, "work-w1")); err != nil {
					t.Fatal(err)
				}
				e.succeeds(t, run, w1, e.worker("w2"))
				e.chargedOnce(t, "w1")
				if n := e.lines("audits", "audit"); n != 1 {
					t.Errorf("%d audits, want 1 (w2's)", n)
				}
			})
		}
	})
}

// An artifact store away for longer than a put waits for it (an S3
// outage, here versitygw stopped) when a non-idempotent task's output is
// put into it does not cost the output: the run fails, saying the output
// awaits the next run, and the next run, with the store back, audits and
// publishes it without charging again. Before, the output was rejected
// and its staging removed: the charge's receipt was gone for good, and
// every later run failed ("not staged any more") until --force charged
// again.
func TestOutputKeptWhileTheStoreIsAway(t *testing.T) {
	srv := s3test.Start(t, "arts")
	e := newEnvOn(t, onSQLite, scenario.LeftOutput, map[string]string{
		"charge.sh": `#!/bin/sh
echo "charge $PIPEC_RUN_ID" >> ledger
printf 'id,worker\n1,local\n' > "$PIPEC_OUTPUT_receipt/data.csv"
touch charged
while [ ! -f release ]; do sleep 0.05; done
`,
		"audit.sh": "#!/bin/sh\necho audit >> audits\n",
		"mail.sh":  scenario.LeftOutputFiles()["mail.sh"],
	})
	run := []string{"run", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--artifacts", "s3://arts/pay"}
	first := e.started(run...)
	e.readFile("charged")
	srv.Stop()
	if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	<-first.Done
	if !strings.Contains(first.Output(), "left staged") {
		t.Fatalf("the run with the store away: %v, want a failure leaving the receipt staged\n%s", first.Err, first.Output())
	}
	srv.Restart()
	code, out := e.pipec(run...)
	if code != 0 || !strings.Contains(out, "charge not run again") {
		t.Fatalf("the next run: exit %d, want 0 adopting the charge\n%s", code, out)
	}
	e.chargedOnce(t, "local")
}

// A worker killed (SIGKILL: its machine lost) while it audits a
// non-idempotent task's output leaves the charge's attempt without an end
// (a visit records it with the visit's end), but with the version it
// recorded, and a version is recorded only once the process succeeded.
// The next visit, on another worker that never saw the first one's
// folder, ends the attempt succeeded, audits the output from the shared
// artifact store and publishes it, and the task is charged once. Before,
// the run failed asking for pipec resolve, and once resolved as
// succeeded, the run submitted again failed too ("not staged any more"):
// only --force (a second charge) got the interval published.
func TestKilledMidAuditAuditedOnAnotherWorker(t *testing.T) {
	onBoth(t, func(t *testing.T, b backend) {
		e := newEnvOn(t, b, scenario.LeftOutput, scenario.LeftOutputFiles())
		w1 := e.worker("w1")
		run := e.submit("2024-01-01")
		e.waitFile("auditing")
		w1.Signal(t, syscall.SIGKILL)
		if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(e.dir, "work-w1")); err != nil {
			t.Fatal(err)
		}
		e.succeeds(t, run, e.worker("w2"))
		e.chargedOnce(t, "w1")
		if n := e.lines("audits", "audit"); n != 2 {
			t.Errorf("%d audits, want 2 (the killed one, and w2's)", n)
		}
	})
}

// A worker killed (its machine lost) after it claimed a non-idempotent
// task and before its visit launched it leaves the claim's attempt
// queued, and the sweep of its expired claim made that attempt unknown.
// It never ran: the task records its launch before its process starts.
// The next visit ends it, unstarted, and runs the task, or, when an
// earlier attempt succeeded and left its output, adopts that attempt and
// publishes the output. Before, the next visit took the claim's attempt
// for one that may have charged, and the run failed until a person ran
// pipec resolve for a charge that never happened (and, resolved, the
// adopted output's publish was fenced by that attempt's token).
func TestClaimOfAKilledWorkerNeverRan(t *testing.T) {
	onBoth(t, func(t *testing.T, b backend) {
		for _, left := range []bool{false, true} {
			name := "the task runs"
			if left {
				name = "a left output is published"
			}
			t.Run(name, func(t *testing.T) {
				e := newEnvOn(t, b, scenario.LeftOutput, scenario.LeftOutputFiles())
				maker := "w2"
				if !left {
					if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				var run string
				if left {
					maker = "w0"
					w0 := e.worker("w0")
					run = e.submit("2024-01-01")
					e.waitFile("auditing")
					w0.Signal(t, syscall.SIGTERM)
					if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				w1 := e.hookedWorker(t, "w1", "before-visit:charge")
				if !left {
					run = e.submit("2024-01-01")
				}
				w1.WaitKilled(t)
				e.succeeds(t, run, e.worker("w2"))
				e.chargedOnce(t, maker)
			})
		}
	})
}

// A worker killed after its non-idempotent task succeeded and its output
// was accepted and published, before its visit's end recorded the
// attempt's end (which it records with the visit's), leaves the attempt
// unknown. But the state holds a version the attempt recorded, and a
// version is recorded only for an attempt whose process succeeded: the
// next visit ends the attempt succeeded, adopts it, and the run goes on
// (mail runs), one charge. Before, the run failed asking a person to
// pipec resolve a charge whose receipt the warehouse already showed.
func TestKilledBeforeItsEndWithARecordedVersion(t *testing.T) {
	onBoth(t, func(t *testing.T, b backend) {
		e := newEnvOn(t, b, scenario.LeftOutput, scenario.LeftOutputFiles())
		if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		w1 := e.hookedWorker(t, "w1", "before-finish:charge")
		run := e.submit("2024-01-01")
		w1.WaitKilled(t)
		e.succeeds(t, run, e.worker("w2"))
		e.chargedOnce(t, "w1")
		if as := e.attempts(run, "charge"); len(as) == 0 || as[0].State != store.AttemptSucceeded {
			t.Fatalf("charge's attempts %+v: want the first succeeded", as)
		}
	})
}

// succeeds waits for run's end and fails t, with the workers' output and
// the run's events, unless it succeeded.
func (e *env) succeeds(t *testing.T, run string, workers ...*proc) {
	t.Helper()
	rs := e.until(run, "the end", finished)
	if rs.Run.State == store.RunSucceeded {
		return
	}
	var out []string
	for _, w := range workers {
		out = append(out, w.Output())
	}
	_, events := e.pipec("events", run, "--state", e.url)
	t.Fatalf("run %s, want succeeded\n%s\n%s", rs.Run.State, strings.Join(out, "\n"), events)
}

// chargedOnce fails t unless scenario.LeftOutput charged once, its
// receipt (made on the worker maker, or "local") is what the warehouse
// shows, and mail ran once.
func (e *env) chargedOnce(t *testing.T, maker string) {
	t.Helper()
	if n := e.lines("ledger", "charge"); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
	got, err := os.ReadFile(filepath.Join(e.dir, "warehouse", "2024-01-01", "data.csv"))
	if want := "id,worker\n1," + maker + "\n"; err != nil || string(got) != want {
		t.Fatalf("published %q (%v), want %q", got, err, want)
	}
	if n := e.lines("mails", "mail"); n != 1 {
		t.Fatalf("%d mails, want 1", n)
	}
}
