package worker_test

import (
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
	sub := exec.Command(pipecBin, "submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "20ms")
	sub.Dir = e.dir
	sub.Env = append(os.Environ(), "PIPEC_STATE=")
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	// The run is the submitter's to create: wait for the task to start
	// without asking the store for a run that may not exist yet.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(e.dir, "started-w1")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task did not start on w1")
		}
	}
	if err := sub.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := sub.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the submitter was not killed by SIGKILL: %v", err)
	}
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
