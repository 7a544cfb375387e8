package dispatch_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/temporaltest"

	"github.com/pipec/pipec/cli"
	"github.com/pipec/pipec/internal/proctest"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/temporal/dispatch"
)

// These tests run real pipec-temporal worker processes (built once in
// TestMain) against a real Temporal server started in the test process
// (go.temporal.io/server/temporaltest) and a state shared as one SQLite
// file, and stop them with real signals.

var (
	bin      string // pipec-temporal
	pipecBin string // pipec, for resolve and status
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

// required: PIPEC_REQUIRE_TEMPORAL=1 (as .ci/run sets) makes a test that
// would skip (go test -short) fail instead.
var required = os.Getenv("PIPEC_REQUIRE_TEMPORAL") == "1"

// needServer skips the end-to-end tests under -short, unless required.
func needServer(t testing.TB) {
	t.Helper()
	if testing.Short() {
		if required {
			t.Fatal("PIPEC_REQUIRE_TEMPORAL=1: the Temporal tests must run (drop -short)")
		}
		t.Skip("-short: no Temporal server, no worker processes")
	}
}

func runMain(m *testing.M) int {
	flag.Parse()
	if testing.Short() && !required {
		return m.Run() // nothing to build: the end-to-end tests skip
	}
	tmp, err := os.MkdirTemp("", "pipec-temporaltest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	bin = filepath.Join(tmp, "pipec-temporal")
	pipecBin = filepath.Join(tmp, "pipec")
	for _, b := range []struct{ out, pkg, dir string }{
		{bin, "./cmd/pipec-temporal", ".."}, // with the test hook (hook_testhook.go)
		{pipecBin, "./cmd/pipec", filepath.Join("..", "..")},
	} {
		build := exec.Command("go", "build", "-o", b.out, b.pkg)
		if b.out == bin {
			build.Args = append(build.Args[:2], append([]string{"-tags", "pipec_testhook"}, build.Args[2:]...)...)
		}
		build.Dir = b.dir
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", b.pkg, err, out)
			return 1
		}
	}
	return m.Run()
}

// env is one test's world: a Temporal server, a state (an SQLite file in
// the test's folder), a folder with the spec and a shared artifact store.
type env struct {
	t      testing.TB
	ts     *temporaltest.TestServer
	engine string
	c      client.Client
	url    string
	dir    string
	arts   string
	st     store.Store
}

func newEnv(t testing.TB, spec string, files map[string]string) *env {
	t.Helper()
	return newEnvAt(t, spec, files, "")
}

// newEnvAt is newEnv with the state at url (a postgres:// URL), or an
// SQLite file in the test's folder when url is "".
func newEnvAt(t testing.TB, spec string, files map[string]string, url string) *env {
	t.Helper()
	needServer(t)
	e := &env{t: t, dir: t.TempDir()}
	if tt, ok := t.(*testing.T); ok {
		e.ts = temporaltest.NewServer(temporaltest.WithT(tt))
	} else {
		e.ts = temporaltest.NewServer()
		t.Cleanup(e.ts.Stop)
	}
	e.engine = "temporal://" + e.ts.GetFrontendHostPort() + "?namespace=" + e.ts.GetDefaultNamespace()
	e.c = e.ts.GetDefaultClient()
	e.url = filepath.Join(e.dir, "state.db")
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
	if url != "" {
		e.url = url
	}
	// The state as pipec worker opens it (whichever package holds the
	// SQLite store).
	sh, err := cli.OpenShared(context.Background(), e.url)
	if err != nil {
		t.Fatal(err)
	}
	st := sh.Store
	e.st = st
	t.Cleanup(func() { st.Close() })
	return e
}

// proc is a running process.
type proc = proctest.Proc

// worker starts a pipec-temporal worker and waits until it registered.
func (e *env) worker(name string, extra ...string) *proc {
	e.t.Helper()
	return e.workerOf(bin, name, extra...)
}

// workerOf starts the worker with binary: pipec-temporal, or pipec (whose
// worker --engine runs pipec-temporal).
func (e *env) workerOf(binary, name string, extra ...string) *proc {
	e.t.Helper()
	return e.workerEnv(binary, nil, name, extra...)
}

// workerEnv starts the worker with more environment.
func (e *env) workerEnv(binary string, environ []string, name string, extra ...string) *proc {
	e.t.Helper()
	args := append([]string{"worker", "--engine", e.engine, "--state", e.url, "--name", name,
		"--workdir", filepath.Join(e.dir, "work-"+name), "--lease", "1s", "--artifacts", e.arts}, extra...)
	cmd := exec.Command(binary, args...)
	cmd.Dir = e.dir
	cmd.Env = append(append(os.Environ(), "PIPEC_STATE=", "PIPEC_ENGINE="), environ...)
	return registered(e.t, proctest.Start(e.t, name, cmd, 0))
}

// registered waits until worker p registered, and fails t if it exited
// first.
func registered(t testing.TB, p *proc) *proc {
	t.Helper()
	if !p.WaitOutput(t, "worker "+p.Name+" registered", 60*time.Second) {
		t.Fatalf("worker %s exited before registering: %v\n%s", p.Name, p.Err, p.Output())
	}
	return p
}

// interrupt sends the worker SIGTERM, and fails t unless it stopped
// cleanly and exited 130 saying so, as pipec worker does.
func interrupt(t testing.TB, p *proc) {
	t.Helper()
	p.Signal(t, syscall.SIGTERM)
	var ee *exec.ExitError
	if !errors.As(p.Err, &ee) || ee.ExitCode() != 130 || !strings.Contains(p.Output(), "pipec-temporal: interrupted") {
		t.Fatalf("worker %s exited with %v after SIGTERM, want exit 130 saying it was interrupted:\n%s", p.Name, p.Err, p.Output())
	}
}

// run runs a command of bin (pipec-temporal or pipec) to its end.
func (e *env) run(binary string, args ...string) (int, string) {
	e.t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "PIPEC_STATE=", "PIPEC_ENGINE=")
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return code, string(out)
}

// submit submits the interval through Temporal; with wait, it follows the
// run to its end.
func (e *env) submit(interval string, wait bool, extra ...string) (code int, run, out string) {
	e.t.Helper()
	args := append([]string{"submit", "pipeline.hcl", "--interval", interval, "--engine", e.engine, "--state", e.url}, extra...)
	if wait {
		args = append(args, "--wait")
	}
	code, out = e.run(bin, args...)
	if i := strings.Index(out, "submitted "); i >= 0 {
		_, _ = fmt.Sscanf(out[i:], "submitted %s", &run)
	}
	if run == "" && code == 0 {
		e.t.Fatalf("submit: exit %d, output %q: no run", code, out)
	}
	return code, run, out
}

// until waits for the run to end in the state and returns it.
func (e *env) until(run string) store.Run {
	e.t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); ; {
		r, err := e.st.GetRun(context.Background(), run)
		if err != nil {
			e.t.Fatal(err)
		}
		if r.State != store.RunRunning {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s did not end", run)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) attempts(run, task string) []store.Attempt {
	e.t.Helper()
	as, err := e.st.Attempts(context.Background(), run)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []store.Attempt
	for _, a := range as {
		if a.Task == task {
			out = append(out, a)
		}
	}
	return out
}

// waitFile waits for a file the test's tasks write.
func (e *env) waitFile(name string) string {
	e.t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if b, err := os.ReadFile(filepath.Join(e.dir, name)); err == nil {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("gave up waiting for %s", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

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

// status asks the run's workflow. A query waits for the workflow's task in
// flight, which after a server restart may wait out Temporal's own
// timeouts, and the client gives a call 10 s at most: a query that ran out
// of time is asked again, for a minute.
func (e *env) status(pipeline, interval string) dispatch.Status {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s, err := dispatch.Query(context.Background(), e.c, e.wid(pipeline, interval), "")
		if err == nil {
			return s
		}
		if !timedOut(err) || time.Now().After(deadline) {
			e.t.Fatal(err)
		}
		e.t.Logf("query of %s %s: %v; asking again", pipeline, interval, err)
	}
}

// timedOut: a call to Temporal ran out of time (the client's deadline, or
// the server's answer that it did).
func timedOut(err error) bool {
	var late *serviceerror.DeadlineExceeded
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &late)
}

// pairSpec is a producer and a consumer whose output is checked and
// published to a directory sink with token fencing.
func pairSpec(pipeline string, extra string) string {
	return fmt.Sprintf(`
pipeline %q {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw"]
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
`, pipeline, extra)
}

var pairFiles = map[string]string{
	"extract.sh": "#!/bin/sh\necho \"extract $PIPEC_RUN_ID $PIPEC_WORKER\" >> ran\nprintf 'id,worker\\n1,%s\\n' \"$PIPEC_WORKER\" > \"$PIPEC_OUTPUT_raw/data.csv\"\n",
	"clean.sh": "#!/bin/sh\necho \"clean $PIPEC_RUN_ID $PIPEC_WORKER\" >> ran\n" +
		"if [ -f stall-on ] && [ \"$(cat stall-on)\" = \"$PIPEC_WORKER\" ]; then echo $$ > stalled.tmp && mv stalled.tmp stalled && exec sleep 120; fi\n" +
		"cp \"$PIPEC_INPUT_raw/data.csv\" \"$PIPEC_OUTPUT_clean/data.csv\"\n",
}

// wid is the workflow of the interval's runs in the env's state
// (dispatch.Names).
func (e *env) wid(pipeline, interval string) string {
	e.t.Helper()
	id, err := e.st.StateID(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return dispatch.Names{State: id}.WorkflowID(pipeline, interval)
}
