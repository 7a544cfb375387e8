// Package faulttest drives the real pipec binary through crashes: it is
// built once in TestMain and killed with SIGKILL at random points of a run.
package faulttest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

var pipecBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "pipec-faulttest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	pipecBin = filepath.Join(tmp, "pipec")
	build := exec.Command("go", "build", "-o", pipecBin, "./cmd/pipec")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building pipec: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

const crashHCL = `
pipeline "crash" {
  code_version = "c1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "a" {
    command = ["./step.sh", "a"]
    outputs = ["a_out"]
  }
  task "b" {
    command = ["./step.sh", "b"]
    inputs  = ["a_out"]
    outputs = ["b_out"]
  }
  task "c" {
    command = ["./step.sh", "c"]
    inputs  = ["b_out"]
    outputs = ["c_out"]
  }
  task "d" {
    command = ["./step.sh", "d"]
    inputs  = ["a_out"]
    outputs = ["d_out"]
  }
  check "b_ok" {
    input         = "b_out"
    row_count_min = 3
    unique        = ["id"]
  }
  check "c_ok" {
    input         = "c_out"
    row_count_min = 3
  }
  sink "sb" {
    type    = "directory"
    path    = "sink/b"
    fencing = "token"
  }
  sink "sc" {
    type    = "directory"
    path    = "sink/c"
    fencing = "token"
  }
  publish "pb" {
    artifact = "b_out"
    sink     = "sb"
  }
  publish "pc" {
    artifact = "c_out"
    sink     = "sc"
  }
}
`

// step.sh writes three rows naming its task and interval, slowly enough
// that a kill lands in the middle of the run as often as between tasks.
const stepScript = `#!/bin/sh
set -eu
out=$(env | sed -n 's/^PIPEC_OUTPUT_[^=]*=//p' | head -n 1)
day=$(printf '%s' "$PIPEC_INTERVAL_START" | cut -c1-10)
echo "id,task,day" > "$out/$1.csv"
sleep 0.02
echo "1,$1,$day" >> "$out/$1.csv"
sleep 0.02
echo "2,$1,$day" >> "$out/$1.csv"
echo "3,$1,$day" >> "$out/$1.csv"
`

// TestCrashAndResume is fault test 5: pipec run is killed with SIGKILL at a
// random point in 20 runs; every rerun completes, every sink shows exactly
// one complete version per interval, no attempt of the crashed run publishes
// afterwards, and the database passes PRAGMA integrity_check.
func TestCrashAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pipeline.hcl"), []byte(crashHCL), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "step.sh"), []byte(stepScript), 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 7))
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var killedMidRun int
	for i := 0; i < 20; i++ {
		day := start.AddDate(0, 0, i).Format(time.DateOnly)
		delay := time.Duration(rng.IntN(300)) * time.Millisecond
		crashed := crashOnce(t, dir, day, delay)
		if crashed {
			killedMidRun++
		}
		out, code := pipec(t, dir, "run", "pipeline.hcl", "--interval", day)
		if code != 0 {
			t.Fatalf("%s: rerun after a kill at %s exited %d:\n%s", day, delay, code, out)
		}
		checkSinks(t, dir, day)
		checkCrashedRunSilent(t, dir, day)
	}
	if killedMidRun < 10 {
		t.Errorf("only %d of 20 kills landed before the run ended; the test does not test much", killedMidRun)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, ".pipec", "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.IntegrityCheck(context.Background()); err != nil {
		t.Fatalf("integrity check: %v", err)
	}
	// The last interval's last run succeeded: r2 after a kill mid-run, r1
	// when the kill came after the run had ended.
	if out, code := pipec(t, dir, "status"); code != 0 || !regexp.MustCompile(`crash/2024-01-20/r\d+  succeeded(\n  [^\n]*)*(\n\(tasks in the order they started[^\n]*\))?\s*$`).MatchString(out) {
		t.Errorf("status exited %d:\n%s", code, out)
	}
}

// crashOnce starts pipec run and kills it after delay; it reports whether
// the run was still going.
func crashOnce(t *testing.T, dir, day string, delay time.Duration) bool {
	t.Helper()
	cmd := exec.Command(pipecBin, "run", "pipeline.hcl", "--interval", day)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(delay)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	err := cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if err == nil {
		return false // finished before the kill
	}
	if !ws.Signaled() {
		t.Fatalf("%s: pipec run failed on its own: %v\n%s", day, err, out.String())
	}
	// The orphaned task processes (their own process groups) finish their
	// few rows; give them the time to, so the next round starts clean.
	time.Sleep(60 * time.Millisecond)
	return true
}

// checkSinks: each sink shows one complete version of the interval, and its
// versions folder holds exactly one version of it (the content is the same on
// every attempt, so a second publish would have been a second copy).
func checkSinks(t *testing.T, dir, day string) {
	t.Helper()
	for _, s := range []struct{ name, path, task string }{{"sb", "sink/b", "b"}, {"sc", "sink/c", "c"}} {
		// Resolve the link once, as a reader would.
		target, err := os.Readlink(filepath.Join(dir, s.path, day))
		vis := filepath.Join(dir, s.path, target)
		if err != nil {
			t.Fatalf("%s: sink %s shows nothing: %v", day, s.name, err)
		}
		b, err := os.ReadFile(filepath.Join(vis, s.task+".csv"))
		want := fmt.Sprintf("id,task,day\n1,%[1]s,%[2]s\n2,%[1]s,%[2]s\n3,%[1]s,%[2]s\n", s.task, day)
		if err != nil || string(b) != want {
			t.Fatalf("%s: sink %s shows %q (%v), want %q", day, s.name, b, err, want)
		}
		entries, err := os.ReadDir(filepath.Join(dir, s.path, sink.VersionsDir))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range entries {
			if strings.Contains(e.Name(), "@"+day+"#") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: sink %s holds %d versions of the interval, want 1", day, s.name, n)
		}
	}
}

// checkCrashedRunSilent: once the rerun started, no attempt of the crashed
// run (r1) did anything: no attempt, version or check event. The only r1
// events after that point are the rerun's own: it abandons r1 (its attempts
// become unknown, the run failed), and
// republishing a version that r1 had already accepted (reuse) is logged by
// the store under the version's run.
func checkCrashedRunSilent(t *testing.T, dir, day string) {
	t.Helper()
	out, code := pipec(t, dir, "events", "crash/"+day+"/r1", "--json")
	if code != 0 {
		return // the kill came before the run was even created
	}
	out2, code := pipec(t, dir, "events", "crash/"+day+"/r2", "--json")
	if code != 0 {
		return // the kill came before r1 was created: r1 is the rerun
	}
	rerunStart := int64(1) << 62
	for _, ev := range parseEvents(t, out2) {
		if ev.Kind == store.EventRunCreated {
			rerunStart = ev.Seq
		}
	}
	accepted := map[string]bool{}
	for _, ev := range parseEvents(t, out) {
		var p struct {
			Label string `json:"label"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		if ev.Seq < rerunStart {
			if ev.Kind == store.EventVersionAccepted {
				accepted[p.Label] = true
			}
			continue
		}
		switch {
		case ev.Kind == store.EventRunFinished, ev.Kind == "run.abandoned", ev.Kind == store.EventAttemptUnknown:
			// The rerun abandoning r1 and declaring its attempts unknown.
		case (ev.Kind == store.EventPublishIdempotent || ev.Kind == store.EventPublishWon) && accepted[p.Label]:
		default:
			t.Errorf("%s: the crashed run recorded %s (%s) after the rerun started", day, ev.Kind, ev.Payload)
		}
	}
}

func parseEvents(t *testing.T, out string) []store.Event {
	t.Helper()
	var evs []store.Event
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev store.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("events: %v: %s", err, line)
		}
		evs = append(evs, ev)
	}
	return evs
}

// pipec runs the binary in dir and returns its combined output and exit code.
// started starts pipec in dir in the background, its output gathered (read
// it once it has ended); it is killed when the test ends.
func started(t *testing.T, dir string, args ...string) (*exec.Cmd, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(pipecBin, args...)
	cmd.Dir = dir
	out := new(strings.Builder)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, out
}

func pipec(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(pipecBin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		t.Fatal(err)
	}
	return string(out), 0
}

const heartbeatHCL = `
pipeline "hb" {
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  retry "relaunch" {
    max_attempts = 3
    initial      = "10ms"
  }
  task "long" {
    command = ["./long.sh"]
    retry   = "relaunch"
    timeout = "30s"
    heartbeat {
      every = "100ms"
      lease = "1s"
    }
  }
}
`

// TestHeartbeatCommand: a task that outlives its lease several times over but
// renews it with `pipec heartbeat` keeps its one attempt; one that stops
// renewing is relaunched, and its own heartbeat then reports the lost lease.
func TestHeartbeatCommand(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pipeline.hcl"), []byte(heartbeatHCL), 0o644); err != nil {
		t.Fatal(err)
	}
	// Attempt 1 renews for 1.5s then goes quiet (but stays alive) for twice
	// its lease, then finds its heartbeat refused; later attempts renew
	// throughout. GORACE keeps a -race build of pipec (GOFLAGS=-race)
	// from sleeping its default second at exit, as long as the lease: a
	// task's environment does not pass the test's GORACE on.
	script := `#!/bin/sh
export GORACE=atexit_sleep_ms=0
i=0
while [ $i -lt 15 ]; do "` + pipecBin + `" heartbeat || exit 3; sleep 0.1; i=$((i+1)); done
if [ "$PIPEC_ATTEMPT" = 1 ]; then
  sleep 2
  if "` + pipecBin + `" heartbeat 2> lost.txt; then exit 4; fi
fi
`
	if err := os.WriteFile(filepath.Join(dir, "long.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out, code := pipec(t, dir, "run", "pipeline.hcl", "--interval", "2024-01-01")
	if code != 0 {
		t.Fatalf("run exited %d:\n%s", code, out)
	}
	if !strings.Contains(out, "long#1 unknown: lease expired") || !strings.Contains(out, "long#2 started") {
		t.Errorf("attempt 1 was not relaunched after it stopped renewing:\n%s", out)
	}
	if strings.Contains(out, "long#3") {
		t.Errorf("attempt 2 renewed with pipec heartbeat but was relaunched:\n%s", out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "lost.txt"))
	if err != nil || !strings.Contains(string(b), "lease lost") {
		t.Errorf("the stale attempt's heartbeat said %q (%v)", b, err)
	}
}
