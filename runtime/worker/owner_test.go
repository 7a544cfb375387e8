package worker_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// Workers are refused a shared artifact store whose versions of the
// pipeline another state owns (a production state's, here, whose run put
// them there first), as a local run is: the task is failed before its
// command runs, and does not fail over, since every worker of the state
// shares the store and would be refused alike. Each state's gc would
// otherwise remove the versions the other accepted.
func TestWorkersRefuseAnotherStatesArtifacts(t *testing.T) {
	onBoth(t, testWorkersRefuseAnotherStatesArtifacts)
}

func testWorkersRefuseAnotherStatesArtifacts(t *testing.T, b backend) {
	spec := strings.Replace(artSpec, `outputs = ["raw"]`, `outputs = ["raw"]
    failover {
      per_worker = 1
      global     = 3
    }`, 1)
	e := newEnvOn(t, b, spec, artFiles)
	// Production runs the same spec from its own checkout: its sink is its
	// own, its artifact store the one the workers are given.
	prodDir := filepath.Join(e.dir, "prod")
	if err := os.Mkdir(prodDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"pipeline.hcl": spec, "extract.sh": artFiles["extract.sh"], "clean.sh": artFiles["clean.sh"]} {
		if err := os.WriteFile(filepath.Join(prodDir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	prod := filepath.Join(prodDir, "state.db")
	if code, out := e.pipec("run", filepath.Join("prod", "pipeline.hcl"), "--interval", "2024-01-01", "--state", prod, "--artifacts", e.arts); code != 0 {
		t.Fatalf("the production state's run: exit %d\n%s", code, out)
	}
	out := e.submitRefused(t, "2024-01-02")
	if !strings.Contains(out, "holds the versions of pipeline arts for state") || !strings.Contains(out, filepath.Join("prod", "state.db")) {
		t.Errorf("submit --wait does not say why:\n%s", out)
	}
	e.refusedOnce(t, "arts/2024-01-02/r1", "extract")
}

// submitRefused starts two workers, submits the interval and waits for its
// run, which must fail (exit 1: the refusal of another state's store or
// sink), and returns what submit --wait said. Bounded: a refusal that
// failed over would leave the run waiting for a worker it has not tried.
func (e *env) submitRefused(t *testing.T, interval string) string {
	t.Helper()
	e.worker("w1")
	e.worker("w2")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got, err := e.submitWait(ctx, interval, "20ms")
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("submit --wait on the second state: %v, want exit 1\n%s", err, got)
	}
	return string(got)
}

// refusedOnce fails t unless task of run was claimed by one worker (the
// refusal is the same on every worker: it does not fail over) and never
// started there (its claim's attempt ended unstarted).
func (e *env) refusedOnce(t *testing.T, run, task string) {
	t.Helper()
	if got := e.starts(run, task); len(got) != 1 {
		t.Errorf("%s was claimed by %v, want one worker (the refusal is the same on every worker)", task, got)
	}
	for _, a := range e.attempts(run, task) {
		if a.State != store.AttemptFailed || a.Class != queue.ClassNotStarted {
			t.Errorf("%s ran though refused: %+v", task, a)
		}
	}
}

// A worker's workdir is its state's: a worker of another state given the
// same one (the same --name on one machine, whose default workdir is the
// same) is refused before it claims a task, where both states' first runs
// (r1) would have their attempts' staging in the same folders.
func TestWorkdirOfAnotherState(t *testing.T) {
	e := newEnvOn(t, onSQLite, artSpec, artFiles)
	e.worker("w1")
	other := filepath.Join(e.dir, "staging", "state.db")
	code, out := e.pipec("worker", "--state", other, "--name", "w1", "--workdir", filepath.Join(e.dir, "work-w1"))
	if code == 0 || !strings.Contains(out, "holds the staging, logs and heartbeat files of state") ||
		!strings.Contains(out, e.url) || !strings.Contains(out, other) {
		t.Errorf("a worker of another state on the same workdir: exit %d\n%s", code, out)
	}
}

// Workers are refused a sink bound to another state (a production state's,
// whose run published there first) before they run a task that publishes
// into it, as a local run is: the non-idempotent charge is not run (its
// effect could never be made visible: every publish into that sink is
// refused), and the refusal does not fail over. Before, the charge ran,
// charged, and only its receipt's publish was refused. A submission made
// once the sink is bound is refused by pipec submit itself, as pipec run
// refuses the run, and nothing is handed to the workers.
func TestWorkersRefuseASinkOfAnotherState(t *testing.T) {
	onBoth(t, func(t *testing.T, b backend) {
		e := newEnvOn(t, b, scenario.LeftOutput, scenario.LeftOutputFiles())
		if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		// Submitted while the sink was bound to no state: the workers ask
		// it before they run the charge.
		run := e.submit("2024-01-02")
		prod := filepath.Join(e.dir, "prod", "state.db")
		prodArts := filepath.Join(e.dir, "prod", "artifacts")
		if code, out := e.pipec("run", "pipeline.hcl", "--interval", "2024-01-01", "--state", prod, "--artifacts", prodArts); code != 0 {
			t.Fatalf("the production state's run: exit %d\n%s", code, out)
		}
		e.worker("w1")
		e.worker("w2")
		rs := e.until(run, "the run", finished)
		if rs.Run.State != store.RunFailed {
			t.Fatalf("run %s, want failed", rs.Run.State)
		}
		for _, ts := range rs.Tasks {
			if ts.Task == "charge" && (!strings.Contains(ts.Reason, "sink wh") || !strings.Contains(ts.Reason, "is bound to state") ||
				!strings.Contains(ts.Reason, prod)) {
				t.Errorf("charge's end does not say why: %q", ts.Reason)
			}
		}
		if n := e.lines("ledger", "charge"); n != 1 {
			t.Errorf("%d charges, want 1 (production's): the refused state's charge ran", n)
		}
		e.refusedOnce(t, run, "charge")

		code, out := e.pipec("submit", "pipeline.hcl", "--interval", "2024-01-03", "--state", e.url)
		if code != 1 || !strings.Contains(out, "sink wh") || !strings.Contains(out, "is bound to state") {
			t.Errorf("a submission to the sink bound to production: exit %d, want 1 saying why\n%s", code, out)
		}
		if runs, err := e.st.ListRuns(context.Background(), store.RunFilter{Interval: "2024-01-03"}); err != nil || len(runs) != 0 {
			t.Errorf("the refused submission recorded runs %+v (%v)", runs, err)
		}
	})
}
