package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/pgtest"
	"github.com/pipec/pipec/internal/proctest"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/postgres"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

// These tests run real `pipec worker` processes (built once in TestMain)
// against a real PostgreSQL server (internal/pgtest) or sharing one SQLite
// file (onBoth runs a test on each), and stop them with real signals.

var (
	pipecBin string
	pg       pgtest.Shared
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "pipec-workertest-")
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
	return pg.Main(m)
}

// backend is the kind of state a test's workers share.
type backend string

const (
	onPostgres backend = "postgres"
	onSQLite   backend = "sqlite"
)

// onBoth runs a test as two subtests: workers on PostgreSQL, and workers
// sharing one SQLite file.
func onBoth(t *testing.T, test func(*testing.T, backend)) {
	for _, b := range []backend{onPostgres, onSQLite} {
		t.Run(string(b), func(t *testing.T) { test(t, b) })
	}
}

// handle is the test's own view of the shared state.
type handle interface {
	store.Store
	queue.Queue
}

// env is one test's world: a shared state (a schema on the server, or an
// SQLite file in the test's folder) and a folder with the spec.
type env struct {
	t testing.TB
	// url is the state as workers get it (--state): a postgres:// URL or
	// the SQLite file's path.
	url string
	dir string
	st  handle
	// arts is the shared artifact store every worker gets (--artifacts);
	// "" starts workers without one.
	arts string
}

// newEnv is newEnvOn PostgreSQL.
func newEnv(t testing.TB, spec string, files map[string]string) *env {
	t.Helper()
	return newEnvOn(t, onPostgres, spec, files)
}

func newEnvOn(t testing.TB, b backend, spec string, files map[string]string) *env {
	t.Helper()
	url := ""
	if b == onPostgres {
		url = pg.Server(t).NewSchema(t)
	}
	return newEnvAt(t, url, spec, files)
}

// newEnvAt is newEnvOn with the workers' state at url: a PostgreSQL URL,
// or "" for an SQLite file in the test's folder.
func newEnvAt(t testing.TB, url string, spec string, files map[string]string) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), url: url}
	b := onPostgres
	if url == "" {
		b, e.url = onSQLite, filepath.Join(e.dir, "state.db")
	}
	e.arts = filepath.Join(e.dir, "artifacts")
	if err := os.Mkdir(e.arts, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "pipeline.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(e.dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if b == onPostgres {
		st, err := postgres.Open(context.Background(), e.url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e.st = st
	} else {
		st, err := sqlite.Open(context.Background(), e.url, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e.st = st
	}
	t.Cleanup(func() { e.st.Close() })
	return e
}

// proc is a running pipec process.
type proc = proctest.Proc

// worker starts `pipec worker --name name` with a short lease and waits
// until it registered.
func (e *env) worker(name string, extra ...string) *proc {
	e.t.Helper()
	p := e.workerWith(pipecBin, nil, name, extra...)
	if !strings.Contains(p.Output(), "worker "+name+" registered") {
		<-p.Done
		e.t.Fatalf("worker %s exited before registering: %v\n%s", name, p.Err, p.Output())
	}
	return p
}

// workerWith starts `bin worker` with more environment and waits until it
// registered or died (a test hook may kill it early; the caller looks).
func (e *env) workerWith(bin string, environ []string, name string, extra ...string) *proc {
	e.t.Helper()
	args := append([]string{"worker", "--state", e.url, "--name", name, "--workdir", filepath.Join(e.dir, "work-"+name),
		"--lease", "1s"}, extra...)
	if e.arts != "" {
		args = append(args, "--artifacts", e.arts)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = e.dir
	cmd.Env = append(append(os.Environ(), "PIPEC_STATE="), environ...)
	p := proctest.Start(e.t, name, cmd, 0)
	// Wait until the worker is registered, so that a test starting two
	// workers and then submitting has both live when the first claim is
	// judged (on a loaded machine the second could register after it).
	p.WaitOutput(e.t, "worker "+name+" registered", 60*time.Second)
	return p
}

// pipec runs a pipec command to its end and returns exit code and output.
func (e *env) pipec(args ...string) (int, string) {
	e.t.Helper()
	cmd := exec.Command(pipecBin, args...)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "PIPEC_STATE=")
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return code, string(out)
}

// submit hands the interval to the workers and returns the run id.
func (e *env) submit(interval string) string {
	e.t.Helper()
	code, out := e.pipec("submit", "pipeline.hcl", "--interval", interval, "--state", e.url)
	if code != 0 {
		e.t.Fatalf("submit: exit %d\n%s", code, out)
	}
	var run string
	if _, err := fmt.Sscanf(out, "submitted %s", &run); err != nil {
		e.t.Fatalf("submit output %q: %v", out, err)
	}
	return run
}

// until polls the run's status until cond holds (the deadline only bounds
// a broken test).
func (e *env) until(run, what string, cond func(queue.RunStatus) bool) queue.RunStatus {
	e.t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		rs, err := e.st.Status(context.Background(), run)
		if err != nil {
			e.t.Fatal(err)
		}
		if cond(rs) {
			return rs
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("gave up waiting for %s: %+v", what, rs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func finished(rs queue.RunStatus) bool { return rs.Run.State != store.RunRunning }

// starts lists the workers of the task's starts in order, from the run's
// work.claimed events.
func (e *env) starts(run, task string) []string {
	e.t.Helper()
	evs, err := e.st.Events(context.Background(), run)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		if ev.Kind != queue.EventWorkClaimed || ev.Task != task {
			continue
		}
		var p struct{ Worker string }
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, p.Worker)
	}
	return out
}

// pairSpec is the pipeline the worker tests share: a producer (extract:
// raw) and its consumer (clean: raw -> clean), checked and published to a
// fenced directory sink. extract and clean are the tasks' labels (none when
// empty).
func pairSpec(pipeline string, extract, clean []string) string {
	labels := func(ls []string) string {
		if len(ls) == 0 {
			return ""
		}
		return fmt.Sprintf("\n    labels  = [%q]", strings.Join(ls, `", "`))
	}
	return fmt.Sprintf(`
pipeline %q {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw"]%s
  }
  task "clean" {
    command = ["./clean.sh"]
    inputs  = ["raw"]
    outputs = ["clean"]%s
  }
  check "clean_ok" {
    input         = "clean"
    row_count_min = 1
  }
  sink "out" {
    type    = "directory"
    path    = "warehouse"
    fencing = "token"
  }
  publish "mart" {
    artifact = "clean"
    sink     = "out"
  }
}
`, pipeline, labels(extract), labels(clean))
}

var dagSpec = pairSpec("dag", nil, nil)

var dagFiles = map[string]string{
	"extract.sh": "#!/bin/sh\nprintf 'id,worker\\n1,%s\\n' \"$PIPEC_WORKER\" > \"$PIPEC_OUTPUT_raw/data.csv\"\n",
	"clean.sh":   "#!/bin/sh\ncp \"$PIPEC_INPUT_raw/data.csv\" \"$PIPEC_OUTPUT_clean/data.csv\"\necho \"clean on $PIPEC_WORKER\" >&2\n",
}

// TestSubmitAndWorkers: a run handed to two workers completes; submit
// --wait follows it and exits 0; the published file is the producer's
// data, written with PIPEC_WORKER set; pipec workers lists both.
func TestSubmitAndWorkers(t *testing.T) { onBoth(t, testSubmitAndWorkers) }

func testSubmitAndWorkers(t *testing.T, b backend) {
	e := newEnvOn(t, b, dagSpec, dagFiles)
	e.worker("w1")
	e.worker("w2")
	code, out := e.pipec("submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "20ms")
	if code != 0 {
		t.Fatalf("submit --wait: exit %d\n%s", code, out)
	}
	for _, want := range []string{"submitted dag/2024-01-01/r1 (2 tasks)", "extract: succeeded", "clean: succeeded", "run dag/2024-01-01/r1 succeeded"} {
		if !strings.Contains(out, want) {
			t.Errorf("submit --wait output lacks %q:\n%s", want, out)
		}
	}
	data, err := os.ReadFile(filepath.Join(e.dir, "warehouse", "2024-01-01", "data.csv"))
	if err != nil {
		entries, _ := filepath.Glob(filepath.Join(e.dir, "warehouse", "*", "*"))
		t.Fatalf("published file: %v (sink has %v)", err, entries)
	}
	if !strings.HasPrefix(string(data), "id,worker\n1,w") {
		t.Fatalf("published data %q", data)
	}
	code, out = e.pipec("workers", "--state", e.url)
	if code != 0 || !strings.Contains(out, "w1  host") || !strings.Contains(out, "w2  host") || !strings.Contains(out, "live") {
		t.Fatalf("pipec workers: exit %d\n%s", code, out)
	}
}
