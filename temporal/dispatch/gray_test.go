package dispatch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/pgtest"
	"github.com/pipec/pipec/internal/spectest"
	"github.com/pipec/pipec/runtime/store"
)

// holdSpec is one task whose output names its worker; on w1 its process
// holds until "release" exists.
const holdSpec = `
pipeline "hold" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "load" {
    command = ["./hold.sh"]
    outputs = ["out"]
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
  publish "p" {
    artifact = "out"
    sink     = "wh"
  }
}
`

var holdFiles = map[string]string{"hold.sh": `#!/bin/sh
if [ "$PIPEC_WORKER" = w1 ]; then
  echo $$ > started-w1.tmp && mv started-w1.tmp started-w1
  while [ ! -f release ] && [ -f hold.sh ]; do sleep 0.05; done
fi
printf 'id,worker\n1,%s\n' "$PIPEC_WORKER" > "$PIPEC_OUTPUT_out/data.csv"
echo "$PIPEC_WORKER done" >> done
`}

// Gray failure: w1 is paused (SIGSTOP) mid-task past the heartbeat
// timeout. Temporal gives up on its visit; pipec makes its attempt
// unknown and routes the task to w2, whose attempt has a higher token and
// publishes. w1 resumes and its task's process completes: its late
// outputs are fenced (its attempt is no longer running: no version is
// accepted, and the sink holds a higher token), so the published data is
// w2's, whole. w1 is recorded as another machine's (PIPEC_TEST_HOST, the
// test build's hook), so w2 cannot end its task's process, as on a real
// second machine. On PostgreSQL: a process stopped inside an SQLite write
// transaction would hold the file's lock.
func TestSIGSTOPGrayFailure(t *testing.T) {
	pg := pgtest.Start(t)
	e := newEnvAt(t, holdSpec, holdFiles, pg.NewSchema(t))
	// w1 is another machine (the test hook): w2 may not end its process.
	w1 := e.workerEnv(bin, []string{"PIPEC_TEST_HOST=elsewhere"}, "w1")
	_, run, _ := e.submit("2024-01-01", false, "--heartbeat", "2s")
	e.waitFile("started-w1")
	e.worker("w2")
	w1.Signal(t, syscall.SIGSTOP)
	if r := e.until(run); r.State != store.RunSucceeded {
		w1.Signal(t, syscall.SIGCONT)
		t.Fatalf("run %s, want succeeded", r.State)
	}
	published := func() string {
		b, _ := os.ReadFile(filepath.Join(e.dir, "warehouse", "2024-01-01", "data.csv"))
		return string(b)
	}
	if got := published(); got != "id,worker\n1,w2\n" {
		w1.Signal(t, syscall.SIGCONT)
		t.Fatalf("published %q, want w2's", got)
	}
	// w1's task completes while w1 is paused (its process is not), then
	// w1 resumes and finds it done: the late completion.
	if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); !strings.Contains(e.waitFile("done"), "w1 done"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			w1.Signal(t, syscall.SIGCONT)
			t.Fatal("w1's task never completed")
		}
	}
	w1.Signal(t, syscall.SIGCONT)
	for deadline := time.Now().Add(time.Minute); strings.Count(w1.Output(), "load: ") < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("w1's visit did not end:\n%s", w1.Output())
		}
	}
	time.Sleep(2 * time.Second) // whatever w1's visit still tries
	if got := published(); got != "id,worker\n1,w2\n" {
		t.Fatalf("after w1 resumed: published %q, want w2's still", got)
	}
	// w1's attempt may be recorded succeeded (its process did exit 0, seen
	// by w1 once resumed, before or after Temporal told it the visit was
	// over) or not: either is true. What must hold is the fencing: w2's
	// attempt is newer and is what is visible (checked above).
	as := e.attempts(run, "load")
	if len(as) != 2 || as[0].Worker != "w1" || as[1].Worker != "w2" ||
		as[1].State != store.AttemptSucceeded || as[1].Token <= as[0].Token {
		t.Fatalf("attempts %+v: want w1's, then w2's succeeded with a higher token", as)
	}
}

// A PostgreSQL server that stops answering, its connections open (every
// process of it stopped: a hung server, or a network that drops packets),
// holds no worker on Temporal up: it says the state is unreachable, and it
// stops when told to; once the server answers again another worker
// finishes the run.
func TestStateStopsAnswering(t *testing.T) {
	pg := pgtest.Start(t)
	e := newEnvAt(t, holdSpec, holdFiles, pg.NewSchema(t))
	w1 := e.worker("w1")
	_, run, _ := e.submit("2024-01-01", false, "--heartbeat", "2s")
	e.waitFile("started-w1")
	thaw := pg.Frozen(t)
	w1.WaitOutput(t, "the state is unreachable", 30*time.Second)
	w1.Signal(t, syscall.SIGTERM) // fails the test unless w1 exits
	if !strings.Contains(w1.Output(), "stopped without handing its tasks back") {
		t.Fatalf("w1 did not say it stopped without handing its task back:\n%s", w1.Output())
	}
	thaw()
	e.worker("w2")
	if r := e.until(run); r.State != store.RunSucceeded {
		t.Fatalf("run %s, want succeeded", r.State)
	}
}

// PostgreSQL restarted again and again for a moment while a run goes on
// through Temporal: a visit whose attempt the state could not record is its
// worker's failure, not the task's (runtime.VisitResult.Ended, as for pipec
// worker), so its task is routed again and the run succeeds. Each task's
// output is recorded, audited and published through a fenced sink, and
// every other task charges: each charge is made once.
func TestStateBlipsMidRun(t *testing.T) {
	pg := pgtest.Start(t)
	e, run, charges := startChain(t, pg, "sleep 0.3")
	time.Sleep(time.Second)
	for range 6 {
		if err := pg.Restart(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(350 * time.Millisecond)
	}
	e.chainSucceeded(run, charges)
}

// PostgreSQL crashes (an immediate shutdown, then crash recovery, which
// takes back the last asynchronous commits) four times, 300 ms apart,
// while a run goes on through Temporal: the run succeeds, its outputs
// published, and each charge is made once, as with pipec worker.
func TestStateCrashesMidRun(t *testing.T) {
	pg := pgtest.Start(t)
	e, run, charges := startChain(t, pg, "sleep 0.1")
	e.waitFile("charges")
	for range 4 {
		time.Sleep(300 * time.Millisecond)
		if err := pg.Crash(); err != nil {
			t.Fatal(err)
		}
	}
	e.chainSucceeded(run, charges)
}

// PostgreSQL crashes the moment each task of the chain starts, while the
// run goes on through Temporal: the run succeeds, and each charge is made
// once (a non-idempotent task's start is a synchronous commit, before its
// process starts).
func TestStateCrashesAtStarts(t *testing.T) {
	pg := pgtest.Start(t)
	e, run, charges := startChain(t, pg, "sleep 0.3")
	for i := range chainTasks {
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			if got, _ := os.ReadFile(charges); strings.Contains(string(got), fmt.Sprintf("t%d\n", i)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("t%d did not start", i)
			}
		}
		if err := pg.Crash(); err != nil {
			t.Fatal(err)
		}
	}
	e.chainSucceeded(run, charges)
}

// chainTasks is the length of startChain's chain.
const chainTasks = 10

// startChain submits, to two workers w1 and w2 on a schema of pg, the run
// of 2024-01-01 of pipeline "chain": spectest's chain of chainTasks tasks
// with outputs, checks and fenced publishes, every other task charging.
// Each task writes its name to the file charges (in the env's folder) as
// it starts, and runs after when its output is written.
func startChain(t *testing.T, pg *pgtest.Server, after string) (e *env, run, charges string) {
	t.Helper()
	spec := spectest.Chain{Pipeline: "chain", N: chainTasks, CodeVersion: "v1", Daily: true, Charging: true, Fenced: true,
		Before: "echo $PIPEC_TASK >> charges", After: after}.HCL()
	e = newEnvAt(t, spec, nil, pg.NewSchema(t))
	e.worker("w1")
	e.worker("w2")
	_, run, _ = e.submit("2024-01-01", false)
	return e, run, filepath.Join(e.dir, "charges")
}

// chainSucceeded waits for the run of startChain's chain to end, and
// fails the test unless it succeeded with every task's output published
// and each charging task run once.
func (e *env) chainSucceeded(run, charges string) {
	e.t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		r, err := e.st.GetRun(context.Background(), run)
		if err == nil && r.State != store.RunRunning {
			if r.State != store.RunSucceeded {
				e.t.Fatalf("run %s, want succeeded", r.State)
			}
			break
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s did not end (%v)", run, err)
		}
	}
	b, err := os.ReadFile(charges)
	if err != nil {
		e.t.Fatal(err)
	}
	ran := strings.Fields(string(b))
	if not := spectest.NotChargedOnce(ran, chainTasks); len(not) > 0 {
		e.t.Errorf("charging tasks %v did not run once (all: %v)", not, ran)
	}
	for i := range chainTasks {
		got, err := os.ReadFile(filepath.Join(e.dir, "out", fmt.Sprintf("a%d", i), "2024-01-01", "a.csv"))
		if want := fmt.Sprintf("id\n%d\n", i); err != nil || string(got) != want {
			e.t.Errorf("a%d published: %q, %v; want %q", i, got, err, want)
		}
	}
	e.t.Logf("ran %v", ran)
}
