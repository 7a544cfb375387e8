package worker_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pipec/pipec/runtime/store"
)

// beatSpec is one task with a heartbeat block whose lease (2s) is far
// shorter than the task, yet long enough that a renewal held up by a loaded
// machine (a process start and an fsynced write) does not lose it.
const beatSpec = `
pipeline "beat" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "long" {
    command = ["./long.sh"]
    timeout = "2m"
    heartbeat {
      every = "100ms"
      lease = "2s"
    }
  }
}
`

// withPassword is the test server's URL with a password in it (the server
// trusts local connections, so it is never asked for): what a task is
// given must not contain it.
func withPassword(url string) string {
	return strings.Replace(url, "postgres://postgres@", "postgres://postgres:sekrit-pw@", 1) + "&password=sekrit-q"
}

// TestHeartbeatCommandOnWorker: a task on a worker that runs `pipec
// heartbeat` for more than twice its lease (45 renewals 0.1s apart) keeps its
// one attempt. Under a server's state the command renews through the
// heartbeat file the worker watches, and PIPEC_STATE holds the server's URL
// without any password; on a worker sharing an SQLite file PIPEC_STATE is
// that file's absolute path, and the command renews in it.
func TestHeartbeatCommandOnWorker(t *testing.T) { onBoth(t, testHeartbeatCommandOnWorker) }

func testHeartbeatCommandOnWorker(t *testing.T, b backend) {
	script := `#!/bin/sh
printf '%s' "$PIPEC_STATE" > state.txt
i=0
while [ $i -lt 45 ]; do "` + pipecBin + `" heartbeat 2>> beat.err || exit 3; sleep 0.1; i=$((i+1)); done
`
	e := newEnvOn(t, b, beatSpec, map[string]string{"long.sh": script})
	if b == onPostgres {
		e.worker("w1", "--state", withPassword(e.url))
	} else {
		e.worker("w1")
	}
	run := e.submit("2024-01-01")
	rs := e.until(run, "the run's end", finished)
	if rs.Run.State != store.RunSucceeded {
		said, _ := os.ReadFile(filepath.Join(e.dir, "beat.err"))
		t.Fatalf("run %s: %+v\nheartbeat said: %s", rs.Run.State, rs.Tasks, said)
	}
	if as := e.attempts(run, "long"); len(as) != 1 || as[0].State != store.AttemptSucceeded {
		t.Fatalf("long's attempts: %+v", as)
	}
	if n := e.events(run, store.EventAttemptUnknown, "long"); n != 0 {
		t.Fatalf("long's lease expired %d times although it ran pipec heartbeat", n)
	}
	data, err := os.ReadFile(filepath.Join(e.dir, "state.txt"))
	if err != nil {
		t.Fatal(err)
	}
	st := string(data)
	if b == onPostgres && (!strings.HasPrefix(st, "postgres://postgres@/") || strings.Contains(st, "sekrit")) ||
		b == onSQLite && st != e.url {
		t.Fatalf("PIPEC_STATE of the task: %q", st)
	}
}

// TestHeartbeatCommandOnWorkerLost: a task that stops renewing past its
// lease loses it; the worker stops the task, and the task's pipec heartbeat
// (from its SIGTERM trap) reports the lease lost with exit code 1.
func TestHeartbeatCommandOnWorkerLost(t *testing.T) { onBoth(t, testHeartbeatCommandOnWorkerLost) }

func testHeartbeatCommandOnWorkerLost(t *testing.T, b backend) {
	script := `#!/bin/sh
trap '"` + pipecBin + `" heartbeat 2> lost.txt; echo $? > lost.part; mv lost.part lost.code; exit 1' TERM
"` + pipecBin + `" heartbeat || exit 3
sleep 30 &
wait
`
	e := newEnvOn(t, b, beatSpec, map[string]string{"long.sh": script})
	w1 := e.worker("w1")
	// The lost lease is w1's, not the task's: w1 starts the task again.
	// Stop it (and that attempt) before the test's folder goes.
	defer w1.Signal(t, syscall.SIGTERM)
	run := e.submit("2024-01-01")
	e.waitFile("lost.code") // whole once there: the script renames it into place
	said, err := os.ReadFile(filepath.Join(e.dir, "lost.txt"))
	if err != nil || !strings.Contains(string(said), "lease lost for long attempt 1") {
		t.Fatalf("the stale attempt's heartbeat said %q (%v)", said, err)
	}
	if b, _ := os.ReadFile(filepath.Join(e.dir, "lost.code")); strings.TrimSpace(string(b)) != "1" {
		t.Fatalf("pipec heartbeat exited %q, want 1", b)
	}
	if as := e.attempts(run, "long"); len(as) == 0 || as[0].State == store.AttemptSucceeded {
		t.Fatalf("long's attempts: %+v", as)
	}
}
