package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/cli"
	"github.com/pipec/pipec/internal/pgtest"
	"github.com/pipec/pipec/internal/proctest"
	"github.com/pipec/pipec/internal/spectest"
	"github.com/pipec/pipec/internal/tracked"
)

// pipecIn runs pipec in-process with PIPEC_STATE unset and returns its exit
// code, stdout and stderr.
func pipecIn(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(args, testIO(env, &out, &errb))
	return code, out.String(), errb.String()
}

// testIO is the IO of an in-process pipec: env its environment (no
// PIPEC_STATE unless given), out and errb its streams.
func testIO(env map[string]string, out, errb *bytes.Buffer) cli.IO {
	return cli.IO{Stdin: strings.NewReader(""), Stdout: out, Stderr: errb,
		Getenv:  func(k string) string { return env[k] },
		Environ: func() []string { return []string{"PATH=" + os.Getenv("PATH")} }}
}

// writeSpec writes hcl as pipeline.hcl in a new folder and returns both.
func writeSpec(t *testing.T, hcl string) (dir, spec string) {
	t.Helper()
	dir = t.TempDir()
	spec = filepath.Join(dir, "pipeline.hcl")
	if err := os.WriteFile(spec, []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, spec
}

// TestRunOnPostgres: `pipec run --state postgres://…` runs the orders
// example on a real PostgreSQL server, and status reads it back from there
// (PIPEC_STATE works the same); a second run reuses what the first did.
func TestRunOnPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.NewSchema(t)
	dir := t.TempDir()
	tracked.Copy(t, filepath.Join("..", "examples", "orders"), dir)
	spec := filepath.Join(dir, "pipeline.hcl")
	code, out, errs := pipecIn(t, nil, "run", spec, "--interval", "2024-01-01", "--state", url)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = pipecIn(t, map[string]string{"PIPEC_STATE": url}, "status", spec)
	if code != 0 || !strings.Contains(out, "orders/2024-01-01/r1") || !strings.Contains(out, "succeeded") {
		t.Fatalf("status: exit %d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, ".pipec", "state.db")); !os.IsNotExist(err) {
		t.Fatalf("an SQLite state was made beside the spec: %v", err)
	}
	code, out, errs = pipecIn(t, nil, "run", spec, "--interval", "2024-01-01", "--state", url)
	if code != 0 || !strings.Contains(out+errs, "reused") {
		t.Fatalf("second run: exit %d\n%s\n%s", code, out, errs)
	}
	n, err := srv.Psql(t.Context(), "", "SELECT count(*) FROM "+schemaOf(url)+".runs")
	if err != nil || strings.TrimSpace(n) != "2" {
		t.Fatalf("runs in PostgreSQL: %q, %v", n, err)
	}
}

// TestStateURLPasswordHidden: a state URL's password never shows in a
// message.
func TestStateURLPasswordHidden(t *testing.T) {
	dir := t.TempDir()
	tracked.Copy(t, filepath.Join("..", "examples", "orders"), dir)
	url := "postgres://pipec:s3cretpw@/db?host=" + filepath.Join(dir, "nosocket") + "&connect_timeout=2"
	code, out, errs := pipecIn(t, nil, "run", filepath.Join(dir, "pipeline.hcl"), "--interval", "2024-01-01", "--state", url)
	if code != 1 || strings.Contains(out+errs, "s3cretpw") {
		t.Fatalf("exit %d, output shows the password or is wrong:\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "xxxxx") {
		t.Errorf("the state is not named (redacted) in the message:\n%s", errs)
	}
}

func schemaOf(url string) string {
	i := strings.Index(url, "search_path=")
	return strings.SplitN(url[i+len("search_path="):], "&", 2)[0]
}

// TestRunOnPostgresKeywordValue: a libpq keyword/value string given as the
// state (--state or PIPEC_STATE) is the PostgreSQL server it names, not the
// name of an SQLite file, and its password shows in no message.
func TestRunOnPostgresKeywordValue(t *testing.T) {
	srv := pgtest.Start(t)
	schema := schemaOf(srv.NewSchema(t))
	dsn := fmt.Sprintf("host=%s port=%d user=postgres password='s3cret pw' dbname=postgres sslmode=disable search_path=%s",
		srv.SocketDir, srv.Port, schema)
	dir := t.TempDir()
	tracked.Copy(t, filepath.Join("..", "examples", "orders"), dir)
	t.Chdir(dir) // a state taken for a file name would be made here
	code, out, errs := pipecIn(t, nil, "run", "pipeline.hcl", "--interval", "2024-01-01", "--state", dsn)
	if code != 0 || strings.Contains(out+errs, "s3cret") {
		t.Fatalf("run: exit %d, or the password shows:\n%s\n%s", code, out, errs)
	}
	code, out, errs = pipecIn(t, map[string]string{"PIPEC_STATE": dsn}, "status", "pipeline.hcl")
	if code != 0 || !strings.Contains(out, "orders/2024-01-01/r1  succeeded") || strings.Contains(out+errs, "s3cret") {
		t.Fatalf("status: exit %d\n%s\n%s", code, out, errs)
	}
	n, err := srv.Psql(t.Context(), "", "SELECT count(*) FROM "+schema+".runs")
	if err != nil || strings.TrimSpace(n) != "1" {
		t.Fatalf("runs in PostgreSQL: %q, %v", n, err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), "=") {
			t.Errorf("a file named after the connection string: %q", e.Name())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".pipec", "state.db")); !os.IsNotExist(err) {
		t.Errorf("an SQLite state was made beside the spec: %v", err)
	}
}

// TestStateKeywordValuePasswordHidden: a keyword/value state whose server
// cannot be reached fails (exit 1: a server that does not answer may be
// down, not misnamed) naming the state with its password masked; nothing is
// made in the working directory.
func TestStateKeywordValuePasswordHidden(t *testing.T) {
	dir := t.TempDir()
	tracked.Copy(t, filepath.Join("..", "examples", "orders"), dir)
	t.Chdir(dir)
	dsn := "host=" + filepath.Join(dir, "nosocket") + " user=pipec password=s3cretpw dbname=pipec connect_timeout=2"
	for _, args := range [][]string{
		{"run", "pipeline.hcl", "--interval", "2024-01-01", "--state", dsn},
		{"status", "--state", dsn},
		{"workers", "--state", dsn},
	} {
		code, out, errs := pipecIn(t, nil, args...)
		if code != 1 || strings.Contains(out+errs, "s3cretpw") {
			t.Errorf("%s: exit %d, or the password shows:\n%s\n%s", args[0], code, out, errs)
		}
		if !strings.Contains(errs, "password=xxxxx") {
			t.Errorf("%s: the state is not named (masked) in the message:\n%s", args[0], errs)
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), "=") || e.Name() == ".pipec" {
			t.Errorf("made in the working directory: %q", e.Name())
		}
	}
}

// A local run on PostgreSQL rides out a restart of the server: the task's
// end, recorded while the server is down, waits for it (up to
// stateRestartWait) instead of failing the task, and the run succeeds.
func TestRunRidesOutRestart(t *testing.T) {
	srv := pgtest.Start(t) // its own server: this test restarts it
	url := srv.NewSchema(t)
	dir, spec := writeSpec(t, `pipeline "restart" {
  code_version = "v1"
  task "a" {
    command = ["sh", "-c", "touch started; sleep 0.5"]
  }
  task "b" {
    command    = ["true"]
    depends_on = ["a"]
  }
}
`)
	restarted := make(chan error, 1)
	go func() {
		proctest.Appears(filepath.Join(dir, "started"), time.Minute)
		restarted <- srv.Restart(2 * time.Second) // a ends while the server is down
	}()
	code, out, errs := pipecIn(t, nil, "run", spec, "--interval", "2024-01-01", "--state", url)
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	if code != 0 || !strings.Contains(out, "run restart/2024-01-01/r1 succeeded") {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
}

// A local run on PostgreSQL rides out restarts of the server, each a
// moment long, wherever they fall: under a write pipelined with its COMMIT
// (a version recorded, its audit, a publish's swap), or before a read on a
// pooled connection the restart closed. Every task has an output, checked
// and published; every other one charges (not idempotent). The run must
// succeed, each charge made once.
func TestRunRidesOutBlips(t *testing.T) {
	ran := runChainThrough(t, "blips", func(srv *pgtest.Server) error {
		for range 6 {
			if err := srv.Restart(100 * time.Millisecond); err != nil {
				return err
			}
			time.Sleep(150 * time.Millisecond)
		}
		return nil
	})
	if len(ran) != chainLength {
		t.Errorf("tasks ran %v, want each of the %d once", ran, chainLength)
	}
}

// A local run on PostgreSQL rides out crashes of the server (an immediate
// shutdown, then crash recovery, which takes back the last asynchronous
// commits), four of them 300 ms apart, on the chain of TestRunRidesOutBlips:
// an idempotent task whose attempt the crash took back runs again under a
// new attempt, as after a lost lease. The run failed at the first such
// attempt before ("attempt … not found": class store, 4 runs of 4), for
// the next run of the interval to resume. Each charge is made once.
func TestRunRidesOutCrashes(t *testing.T) {
	ran := runChainThrough(t, "crashes", func(srv *pgtest.Server) error {
		for range 4 {
			time.Sleep(300 * time.Millisecond)
			if err := srv.Crash(); err != nil {
				return err
			}
		}
		return nil
	})
	if not := spectest.NotChargedOnce(ran, chainLength); len(not) > 0 {
		t.Errorf("tasks ran %v: charging tasks %v not once", ran, not)
	}
	t.Logf("ran %v", ran)
}

// chainLength is the length of runChainThrough's chain.
const chainLength = 10

// runChainThrough runs, locally on a PostgreSQL server of its own, the
// pipeline of spectest's chain of chainLength tasks (outputs, checks,
// fenced publishes, every other task charging), calls faults on the
// server once the first task started, and fails t unless the run
// succeeded. It returns the tasks that ran, a name each time one did.
func runChainThrough(t *testing.T, pipeline string, faults func(*pgtest.Server) error) []string {
	t.Helper()
	srv := pgtest.Start(t) // its own server: faults are done to it
	url := srv.NewSchema(t)
	spec := spectest.Chain{Pipeline: pipeline, N: chainLength, CodeVersion: "v1", Charging: true, Fenced: true,
		Before: "touch started; echo $PIPEC_TASK >> charges", After: "sleep 0.1"}.HCL()
	dir, file := writeSpec(t, spec)
	done := make(chan error, 1)
	go func() {
		if !proctest.Appears(filepath.Join(dir, "started"), time.Minute) {
			done <- errors.New("the run's first task did not start")
			return
		}
		done <- faults(srv)
	}()
	code, out, errs := pipecIn(t, nil, "run", file, "--interval", "2024-01-01", "--state", url)
	if err := <-done; err != nil {
		t.Fatalf("%v\nrun: exit %d\n%s\n%s", err, code, out, errs)
	}
	if code != 0 || !strings.Contains(out, "run "+pipeline+"/2024-01-01/r1 succeeded") {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	charges, err := os.ReadFile(filepath.Join(dir, "charges"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(charges))
}

// TestInterruptOnAFrozenState: `pipec run --json` stopped (Ctrl-C) while
// its PostgreSQL state is frozen (SIGSTOP, connections open) and a charging
// task runs returns: the task is stopped, the log printed so far stays
// valid JSON, and the summary says that the state did not answer. The
// run waited for its state for ever before; the log's reads (the --json
// stream reads the log back after each event) had no bound either, and
// closing the connections waited pgx's 15 s for the frozen server.
func TestInterruptOnAFrozenState(t *testing.T) {
	srv := pgtest.Start(t) // its own server: this test freezes it
	url := srv.NewSchema(t)
	dir, spec := writeSpec(t, `pipeline "frozen" {
  task "charge" {
    command    = ["sh", "-c", "touch started; exec sleep 120"]
    effects    = ["charge"]
    idempotent = false
  }
}
`)
	ctx, stop := context.WithCancelCause(t.Context())
	defer stop(nil)
	var out, errb bytes.Buffer
	io := testIO(nil, &out, &errb)
	io.Context = ctx
	codes := make(chan int, 1)
	go func() {
		codes <- cli.Main([]string{"run", spec, "--interval", "2024-01-01", "--state", url, "--json"}, io)
	}()
	proctest.WaitFile(t, filepath.Join(dir, "started"), time.Minute)
	thaw := srv.Frozen(t)
	stop(cli.ErrInterrupted)
	var code int
	select {
	case code = <-codes:
	case <-time.After(2 * time.Minute): // the bound is 5 + 30 s (and 2 s to close); this ends a broken test
		thaw()
		t.Fatal("pipec run still waits for its frozen state")
	}
	thaw()
	if code != cli.ExitInterrupted {
		t.Errorf("exit %d, want %d\n%s", code, cli.ExitInterrupted, errb.String())
	}
	dec := json.NewDecoder(&out)
	var last map[string]any
	for dec.More() {
		if err := dec.Decode(&last); err != nil {
			t.Fatalf("the output is no JSON stream: %v\n%s", err, out.String())
		}
	}
	sum, _ := last["summary"].(map[string]any)
	if last["kind"] != "run.summary" || !strings.Contains(fmt.Sprint(sum["store_error"]), "the state did not answer within 35s of the stop") {
		t.Fatalf("last entry %v", last)
	}
}

// TestServerStatesShareNoFolder: two states on one PostgreSQL server
// (staging beside production), run from one spec folder at the same time,
// keep their attempts' folders apart: production's task is still writing
// its output when staging's attempt of the same task starts, and each
// state's accepted version holds its own data only. Both number their
// first run r1, and one folder beside the spec had staging's attempt empty
// production's output folder: production accepted staging's data.
func TestServerStatesShareNoFolder(t *testing.T) {
	srv := pgtest.Start(t)
	prod, staging := srv.NewSchema(t), srv.NewSchema(t)
	dir, spec := writeSpec(t, `pipeline "two" {
  task "extract" {
    command = ["sh", "-c", "echo \"$PIPEC_STATE_ID\" > \"$PIPEC_OUTPUT_raw/part-$PIPEC_STATE_ID.csv\"; touch started-$PIPEC_STATE_ID; while [ ! -f go-on ]; do sleep 0.05; done"]
    outputs = ["raw"]
  }
}
`)
	started := func() int {
		m, _ := filepath.Glob(filepath.Join(dir, "started-*"))
		return len(m)
	}
	done := make(chan string, 1)
	go func() {
		code, out, errs := pipecIn(t, nil, "run", spec, "--interval", "2024-01-01", "--state", prod)
		done <- fmt.Sprintf("exit %d\n%s%s", code, out, errs)
	}()
	for deadline := time.Now().Add(time.Minute); started() < 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("production's task never started")
		}
	}
	go func() {
		for deadline := time.Now().Add(time.Minute); started() < 2 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		os.WriteFile(filepath.Join(dir, "go-on"), nil, 0o644)
	}()
	if code, out, errs := pipecIn(t, nil, "run", spec, "--interval", "2024-01-01", "--state", staging); code != 0 {
		t.Errorf("staging's run: exit %d\n%s%s", code, out, errs)
	}
	if got := <-done; !strings.HasPrefix(got, "exit 0\n") {
		t.Errorf("production's run: %s", got)
	}
	// Each state's folder: its versions (the default artifact store) hold
	// one part, its own.
	folders, _ := filepath.Glob(filepath.Join(dir, ".pipec", "server-*.d"))
	for _, f := range folders {
		var of struct{ State string }
		b, err := os.ReadFile(filepath.Join(f, "scratch-of.json"))
		if err == nil {
			err = json.Unmarshal(b, &of)
		}
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		parts, _ := filepath.Glob(filepath.Join(f, "versions", "two", "raw", "*", "part-*"))
		if len(parts) != 1 || filepath.Base(parts[0]) != "part-"+of.State+".csv" {
			t.Errorf("state %s accepted %v, want its own part only", of.State, parts)
		}
	}
	if len(folders) != 2 {
		t.Errorf("the states' folders beside the spec: %v, want one each", folders)
	}
}
