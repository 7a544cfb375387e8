package worker_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
)

// There is no coordinator to lose: `pipec submit --wait` only follows the
// run, so a submitter killed with SIGKILL while a task runs changes
// nothing: the workers finish the run, advance the DAG and publish.
func TestRunGoesOnWithoutItsSubmitter(t *testing.T) { onBoth(t, testRunGoesOnWithoutItsSubmitter) }

func testRunGoesOnWithoutItsSubmitter(t *testing.T, b backend) {
	e := newEnvOn(t, b, holdSpec(""), holdFiles)
	e.worker("w1")
	sub := e.heldSubmitter(t)
	if err := sub.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := sub.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the submitter was not killed by SIGKILL: %v", err)
	}
	e.releasedRunSucceeds(t)
}

// A Ctrl-C stops `pipec submit --wait` following the run, saying that the
// run goes on, and not (as pipec run says) that running tasks are stopped.
func TestSubmitterInterrupted(t *testing.T) {
	e := newEnvOn(t, onSQLite, holdSpec(""), holdFiles)
	e.worker("w1")
	sub := e.heldSubmitter(t)
	if err := sub.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := sub.Wait()
	out := sub.out
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("the interrupted submitter exited with %v, want 130\n%s", err, out.String())
	}
	for _, want := range []string{"pipec: stopping: what is submitted goes on with the workers, and nothing more is submitted; Ctrl-C again exits at once\n",
		"it goes on with the workers"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the interrupted submitter does not say %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "running tasks are stopped") {
		t.Errorf("the interrupted submitter says it stops the running tasks:\n%s", out.String())
	}
	e.releasedRunSucceeds(t)
}

// submitter is a running `pipec submit --wait`, its output in out.
type submitter struct {
	*exec.Cmd
	out *bytes.Buffer
}

// heldSubmitter starts `pipec submit --wait` of holdSpec's interval and
// returns once its task started on w1, where it holds until
// releasedRunSucceeds.
func (e *env) heldSubmitter(t *testing.T) submitter {
	t.Helper()
	sub := submitter{exec.Command(pipecBin, "submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "20ms"),
		&bytes.Buffer{}}
	sub.Dir = e.dir
	sub.Env = append(os.Environ(), "PIPEC_STATE=")
	sub.Stdout, sub.Stderr = sub.out, sub.out
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	// The run is the submitter's to create: wait for the task to start
	// without asking the store for a run that may not exist yet.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(e.dir, "started-w1")); err == nil {
			return sub
		}
		if time.Now().After(deadline) {
			t.Fatal("the task did not start on w1")
		}
	}
}

// releasedRunSucceeds lets heldSubmitter's task end, and fails t unless
// the workers finish the run and publish w1's output.
func (e *env) releasedRunSucceeds(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run := e.anyRun()
	rs := e.until(run, "the run's end", finished)
	if rs.Run.State != store.RunSucceeded {
		t.Fatalf("run %s ended %s without its submitter, want succeeded: %+v", run, rs.Run.State, rs)
	}
	if got := e.published(); !strings.Contains(got, "1,w1") {
		t.Fatalf("published %q, want the w1 task's output", got)
	}
}
