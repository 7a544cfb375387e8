package worker_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/store"
)

// The guarantee matrix: each promise of README.md, docs/runtime.md,
// docs/processes.md and docs/lineage.md, run against every dispatcher with
// real processes and real signals. A dispatcher is a column: a local
// `pipec run`, workers on one SQLite file, workers on PostgreSQL. Another
// dispatcher (an engine such as Temporal) is one more column.

// dispatcher runs an interval of the test's spec one way.
type dispatcher struct {
	name    string
	backend backend
	// local: pipec run; else pipec worker processes and pipec submit.
	local bool
}

var dispatchers = []dispatcher{
	{"local", onSQLite, true},
	{"workers-sqlite", onSQLite, false},
	{"workers-postgres", onPostgres, false},
}

// eachDispatcher runs promise as one subtest per dispatcher.
func eachDispatcher(t *testing.T, promise func(*testing.T, dispatcher)) {
	for _, d := range dispatchers {
		t.Run(d.name, func(t *testing.T) { promise(t, d) })
	}
}

// run runs the interval to its end (for workers: submits it, a worker
// being started when none is, and follows it) and returns pipec's exit
// code and output.
func (d dispatcher) run(e *env, interval string, flags ...string) (int, string) {
	e.t.Helper()
	if d.local {
		return e.pipec(append([]string{"run", "pipeline.hcl", "--interval", interval, "--state", e.url}, flags...)...)
	}
	return e.pipec(append([]string{"submit", "pipeline.hcl", "--interval", interval, "--state", e.url, "--wait", "--poll", "20ms"}, flags...)...)
}

// start starts running the interval in the background: the process that
// runs its tasks (pipec run, or the worker that claims them) is returned,
// to be interrupted.
func (d dispatcher) start(e *env, interval string) *proc {
	e.t.Helper()
	if !d.local {
		w := e.worker("w1")
		e.submit(interval)
		return w
	}
	return e.started("run", "pipeline.hcl", "--interval", interval, "--state", e.url)
}

// interrupt stops the process running the tasks the way a person or a
// supervisor does (Ctrl-C for pipec run, SIGTERM for a worker) and, for
// workers, starts another worker to go on.
func (d dispatcher) interrupt(e *env, p *proc) {
	e.t.Helper()
	if d.local {
		p.Signal(e.t, syscall.SIGINT)
		return
	}
	p.Signal(e.t, syscall.SIGTERM)
	e.worker("w2")
}

// The matrix's pipeline, its scripts and its secret are internal/scenario's
// (Matrix, MatrixFiles, MatrixSecret): Temporal's column runs them too.

func matrixEnv(t *testing.T, d dispatcher, rows string) *env {
	t.Setenv("PIPEC_TEST_SECRET", scenario.MatrixSecret)
	e := newEnvOn(t, d.backend, scenario.Matrix(rows), scenario.MatrixFiles())
	if !d.local {
		e.worker("w0")
	}
	return e
}

// A non-idempotent task interrupted while it runs is never run a second
// time: its attempt is unknown, the run fails naming pipec resolve, and the
// ledger holds one charge, however the run goes on.
func TestMatrixNonIdempotentInterrupted(t *testing.T) {
	eachDispatcher(t, func(t *testing.T, d dispatcher) {
		t.Setenv("PIPEC_TEST_SECRET", scenario.MatrixSecret)
		e := newEnvOn(t, d.backend, scenario.Matrix("1"), scenario.MatrixFiles())
		if err := os.WriteFile(filepath.Join(e.dir, "hold"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		p := d.start(e, "2024-01-01")
		waitFor(e, "held")
		d.interrupt(e, p)
		if d.local {
			if !strings.Contains(p.Output(), "pipec resolve") {
				t.Fatalf("the interrupted run does not name pipec resolve:\n%s", p.Output())
			}
		} else {
			rs := e.until(e.anyRun(), "the run", finished)
			if rs.Run.State != store.RunFailed {
				t.Fatalf("run %s, want failed", rs.Run.State)
			}
		}
		if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		code, out := d.run(e, "2024-01-01")
		if code == 0 || !strings.Contains(out, "pipec resolve") {
			t.Fatalf("the next run: exit %d, want a failure naming pipec resolve\n%s", code, out)
		}
		if n := e.lines("ledger", "charge"); n != 1 {
			t.Fatalf("%d charges in the ledger, want 1", n)
		}
	})
}

// A second run of an interval reuses what the first completed: the
// non-idempotent charge is not repeated, the consumer is not rerun. Once
// the consumer's command is edited (code_version unchanged), a third run
// runs it again, and still not the charge.
func TestMatrixRerunReuses(t *testing.T) {
	eachDispatcher(t, func(t *testing.T, d dispatcher) {
		e := matrixEnv(t, d, "1")
		for i := range 2 {
			code, out := d.run(e, "2024-01-01")
			if code != 0 {
				t.Fatalf("run %d: exit %d\n%s", i+1, code, out)
			}
			// The rerun says so as it goes, whoever dispatches it (pipec
			// submit --wait said "mail: succeeded").
			if i == 1 && !strings.Contains(out, "mail: reused (succeeded in pay/2024-01-01/r1)\n") &&
				!strings.Contains(out, "mail reused (succeeded in pay/2024-01-01/r1)\n") {
				t.Fatalf("run 2 does not say mail was reused:\n%s", out)
			}
		}
		if n := e.lines("ledger", "charge"); n != 1 {
			t.Fatalf("%d charges, want 1", n)
		}
		if n := e.lines("mails", "mail"); n != 1 {
			t.Fatalf("mail ran %d times, want once", n)
		}
		// Status shows the rerun as a local one's: its tasks reused, no
		// attempt (a worker's claim starts one its visit leaves unused).
		_, out := e.pipec("status", "--state", e.url)
		if _, r2, _ := strings.Cut(out, "pay/2024-01-01/r2  succeeded\n"); !strings.HasPrefix(r2, "  charge  reused     (attempt 1 of pay/2024-01-01/r1 succeeded") ||
			!strings.Contains(r2, "\n  mail    reused     (succeeded in pay/2024-01-01/r1)\n") {
			t.Fatalf("status of the rerun:\n%s", out)
		}
		editSpec(t, e, `command = ["./mail.sh"]`, `command = ["sh", "./mail.sh"]`)
		if code, out := d.run(e, "2024-01-01"); code != 0 {
			t.Fatalf("run 3: exit %d\n%s", code, out)
		}
		if n := e.lines("mails", "mail"); n != 2 {
			t.Fatalf("mail ran %d times, want twice: its command was edited", n)
		}
		if n := e.lines("ledger", "charge"); n != 1 {
			t.Fatalf("%d charges, want 1", n)
		}
	})
}

// Dispatchers taking turns on one state: a local run, workers, a local run
// again, workers again. The charge is made once; the workers' claims of it,
// which run nothing, do not make a later run take it for not done.
func TestMatrixDispatchersTakeTurns(t *testing.T) {
	for _, b := range []backend{onSQLite, onPostgres} {
		t.Run(string(b), func(t *testing.T) {
			local, workers := dispatcher{"local", b, true}, dispatcher{"workers", b, false}
			e := matrixEnv(t, workers, "1")
			for i, d := range []dispatcher{local, workers, local, workers} {
				if code, out := d.run(e, "2024-01-01"); code != 0 {
					t.Fatalf("run %d (%s): exit %d\n%s", i+1, d.name, code, out)
				}
			}
			if n := e.lines("ledger", "charge"); n != 1 {
				t.Fatalf("%d charges, want 1", n)
			}
			if n := e.lines("mails", "mail"); n != 1 {
				t.Fatalf("mail ran %d times, want once", n)
			}
		})
	}
}

// A forced run runs every task again, the charge too, whoever dispatches
// it, and publishes its own receipt; the run after it reuses the forced
// run's work. A forced run and a plain one take turns across dispatchers.
func TestMatrixForcedRun(t *testing.T) {
	eachDispatcher(t, func(t *testing.T, d dispatcher) {
		e := matrixEnv(t, d, "1")
		for i, flags := range [][]string{nil, {"--force"}, nil} {
			if code, out := d.run(e, "2024-01-01", flags...); code != 0 {
				t.Fatalf("run %d %v: exit %d\n%s", i+1, flags, code, out)
			}
		}
		if n := e.lines("ledger", "charge"); n != 2 {
			t.Fatalf("%d charges, want 2: the forced run charges again, the run after it does not", n)
		}
		if n := e.lines("mails", "mail"); n != 2 {
			t.Fatalf("mail ran %d times, want twice", n)
		}
		forced := "pay/2024-01-01/r2"
		if _, out := e.pipec("show", "receipt@2024-01-01", "--spec", "pipeline.hcl", "--state", e.url); !strings.Contains(out, forced) {
			t.Fatalf("the visible receipt is not the forced run's (%s):\n%s", forced, out)
		}
		if _, out := e.pipec("status", "--state", e.url); !strings.Contains(out, forced+"  succeeded  (forced: nothing reused)") {
			t.Fatalf("status does not say the run was forced:\n%s", out)
		}
	})
	for _, b := range []backend{onSQLite, onPostgres} {
		t.Run("turns-"+string(b), func(t *testing.T) {
			local, workers := dispatcher{"local", b, true}, dispatcher{"workers", b, false}
			e := matrixEnv(t, workers, "1")
			for i, d := range []dispatcher{local, workers, local} {
				if code, out := d.run(e, "2024-01-01", "--force"); code != 0 {
					t.Fatalf("forced run %d (%s): exit %d\n%s", i+1, d.name, code, out)
				}
				if code, out := d.run(e, "2024-01-01"); code != 0 {
					t.Fatalf("run after forced run %d (%s): exit %d\n%s", i+1, d.name, code, out)
				}
			}
			if n := e.lines("ledger", "charge"); n != 3 {
				t.Fatalf("%d charges, want 3 (one per forced run)", n)
			}
		})
	}
}

// editSpec replaces old, which must be there, with new in the test's spec.
func editSpec(t *testing.T, e *env, old, new string) {
	t.Helper()
	path := filepath.Join(e.dir, "pipeline.hcl")
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), old) {
		t.Fatalf("the spec lacks %q: %v", old, err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A check that fails fails the run, and nothing is published. The charge
// whose receipt it rejected is not made again: a rerun fails the same way,
// saying how to go on, and once the check is edited (it was wrong) the
// rerun audits the same receipt again, from the artifact store, and
// publishes it.
func TestMatrixFailedCheckFailsRun(t *testing.T) {
	eachDispatcher(t, func(t *testing.T, d dispatcher) {
		e := matrixEnv(t, d, "5")
		for _, want := range []string{"receipt_ok", "a check of receipt new or edited since audits this version again"} {
			code, out := d.run(e, "2024-01-01")
			if code == 0 || !strings.Contains(out, want) {
				t.Fatalf("exit %d, want a failed run saying %q\n%s", code, out, want)
			}
			if _, err := os.Stat(filepath.Join(e.dir, "warehouse", "2024-01-01")); err == nil {
				t.Fatalf("something was published")
			}
		}
		editSpec(t, e, "row_count_min = 5", "row_count_min = 1")
		if code, out := d.run(e, "2024-01-01"); code != 0 {
			t.Fatalf("with the check edited: exit %d, want the receipt audited again and the run to succeed\n%s", code, out)
		}
		if _, err := os.Stat(filepath.Join(e.dir, "warehouse", "2024-01-01", "r.csv")); err != nil {
			t.Fatalf("the receipt audited again is not published: %v", err)
		}
		if n, m := e.lines("ledger", "charge"), e.lines("mails", "mail"); n != 1 || m != 1 {
			t.Fatalf("%d charges and %d mails, want 1 each", n, m)
		}
	})
}

// A secret_env value is in no output of pipec, no event, no log.
func TestMatrixSecretsMasked(t *testing.T) {
	eachDispatcher(t, func(t *testing.T, d dispatcher) {
		e := matrixEnv(t, d, "1")
		code, out := d.run(e, "2024-01-01")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		_, events := e.pipec("events", e.anyRun(), "--state", e.url, "--json")
		logs := ""
		_ = filepath.WalkDir(e.dir, func(path string, de os.DirEntry, err error) error {
			if err == nil && !de.IsDir() && strings.HasSuffix(path, ".log") {
				b, _ := os.ReadFile(path)
				logs += string(b)
			}
			return nil
		})
		for what, text := range map[string]string{"output": out, "events": events, "logs": logs} {
			if strings.Contains(text, scenario.MatrixSecret) {
				t.Errorf("the secret is in the %s", what)
			}
		}
		if !strings.Contains(logs, "paying with ***") {
			t.Errorf("the task's log does not show the masked secret:\n%s", logs)
		}
	})
}

// The visible version carries its lineage (_pipec.json: run, task,
// attempt, token, checks), and pipec show names it.
func TestMatrixLineage(t *testing.T) {
	eachDispatcher(t, func(t *testing.T, d dispatcher) {
		e := matrixEnv(t, d, "1")
		if code, out := d.run(e, "2024-01-01"); code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		b, err := os.ReadFile(filepath.Join(e.dir, "warehouse", "2024-01-01", "_pipec.json"))
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Run, Task string
			Attempt   int
			Token     int64
			Checks    []struct{ Name string }
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		run := e.anyRun()
		if m.Run != run || m.Task != "charge" || m.Attempt < 1 || m.Token <= 0 || len(m.Checks) != 1 || m.Checks[0].Name != "receipt_ok" {
			t.Fatalf("lineage %+v, want run %s, task charge, a token and receipt_ok", m, run)
		}
		code, out := e.pipec("show", "receipt@2024-01-01", "--spec", "pipeline.hcl", "--state", e.url)
		if code != 0 || !strings.Contains(out, run) {
			t.Fatalf("pipec show: exit %d, want %s named\n%s", code, run, out)
		}
	})
}

// Two runs of one interval at once: one runs it; the other is refused, or
// (with workers) is the same run.
func TestMatrixOneRunPerInterval(t *testing.T) {
	eachDispatcher(t, func(t *testing.T, d dispatcher) {
		t.Setenv("PIPEC_TEST_SECRET", scenario.MatrixSecret)
		e := newEnvOn(t, d.backend, scenario.Matrix("1"), scenario.MatrixFiles())
		if err := os.WriteFile(filepath.Join(e.dir, "hold"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		p := d.start(e, "2024-01-01")
		waitFor(e, "held")
		code, out := d.run(e, "2024-01-01")
		if code == 0 || !strings.Contains(out, "2024-01-01/r1") {
			t.Fatalf("a second run of the interval: exit %d, want refused naming r1\n%s", code, out)
		}
		if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if d.local {
			<-p.Done
		} else {
			e.until(e.anyRun(), "the run", finished)
		}
		time.Sleep(100 * time.Millisecond)
		if n := e.lines("ledger", "charge"); n != 1 {
			t.Fatalf("%d charges, want 1", n)
		}
	})
}

// waitFor waits until the file exists in the test's folder (whoever
// dispatches the run).
func waitFor(e *env, name string) {
	e.t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(e.dir, name)); err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("gave up waiting for file %s", name)
		}
	}
}

// tornSpec is one task with a heartbeat whose first attempt, stopped
// (SIGSTOP) past its lease, is relaunched; it writes which attempt made
// the data.
const tornSpec = `
pipeline "torn" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "load" {
    command = ["./load.sh"]
    outputs = ["out"]
    heartbeat {
      every = "100ms"
      lease = "1s"
    }
  }
  check "out_ok" {
    input         = "out"
    row_count_min = 1
  }
  sink "wh" {
    type    = "directory"
    path    = "warehouse"
    fencing = "token"
  }
  publish "mart" {
    artifact = "out"
    sink     = "wh"
  }
}
`

var tornFiles = map[string]string{"load.sh": `#!/bin/sh
if [ ! -f held ]; then
  touch held
  echo $$ > held.pid.tmp && mv held.pid.tmp held.pid
  while [ ! -f release ] && [ -f load.sh ]; do touch "$PIPEC_HEARTBEAT"; sleep 0.05; done
fi
printf 'id,token\n1,%s\n' "$PIPEC_TOKEN" > "$PIPEC_OUTPUT_out/data.csv"
`}

// The seed's torn partition: a task's process stopped past its lease is
// relaunched under a higher token, which publishes; the stopped one,
// resumed, cannot make its older data visible. The visible data is always
// the newest attempt's.
func TestMatrixTornPartition(t *testing.T) {
	eachDispatcher(t, func(t *testing.T, d dispatcher) {
		e := newEnvOn(t, d.backend, tornSpec, tornFiles)
		t.Cleanup(func() { _ = os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644) })
		p := d.start(e, "2024-01-01")
		waitFor(e, "held.pid")
		b, err := os.ReadFile(filepath.Join(e.dir, "held.pid"))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		visible := filepath.Join(e.dir, "warehouse", "2024-01-01", "data.csv")
		waitFor(e, filepath.Join("warehouse", "2024-01-01", "data.csv"))
		_ = syscall.Kill(pid, syscall.SIGCONT)
		if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if d.local {
			select {
			case <-p.Done:
			case <-time.After(2 * time.Minute):
				t.Fatalf("the run did not end:\n%s", p.Output())
			}
		} else if rs := e.until(e.anyRun(), "the run", finished); rs.Run.State != store.RunSucceeded {
			t.Fatalf("run %s, want succeeded", rs.Run.State)
		}
		as := e.attempts(e.anyRun(), "load")
		if len(as) < 2 {
			t.Fatalf("attempts %+v: want the stopped one and its relaunch", as)
		}
		newest := as[len(as)-1].Token
		for _, a := range as {
			newest = max(newest, a.Token)
		}
		got, err := os.ReadFile(visible)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("id,token\n1,%d\n", newest); string(got) != want {
			t.Fatalf("visible %q, want the newest attempt's %q", got, want)
		}
	})
}

// A task that changes an accepted input's bytes fails, with class input,
// once, on whichever worker: no retry or failover repeats it, what reads
// the input after it is not run, and the changed copy is not left for
// anyone to read as the version.
func TestMatrixTaskChangesItsInput(t *testing.T) {
	eachDispatcher(t, func(t *testing.T, d dispatcher) {
		e := newEnvOn(t, d.backend, scenario.InputChange, nil)
		if !d.local {
			e.worker("w0")
			e.worker("w1")
		}
		code, out := d.run(e, "2024-01-01")
		if code != 1 || !strings.Contains(out, "changed its input rows (rows.csv removed, rows.old added)") {
			t.Fatalf("exit %d, want a failed run saying use changed its input\n%s", code, out)
		}
		if strings.Contains(out, "read#") {
			t.Errorf("read ran after use changed its input:\n%s", out)
		}
		if n := strings.Count(out, "use#"); d.local && n != 2 { // started, failed
			t.Errorf("use ran %d time(s):\n%s", n/2, out)
		}
		_ = filepath.WalkDir(e.dir, func(p string, _ fs.DirEntry, _ error) error {
			if filepath.Base(p) == "rows.old" {
				t.Errorf("the changed copy is still there: %s", p)
			}
			return nil
		})
	})
}
