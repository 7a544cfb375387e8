package faulttest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/pipec/pipec/internal/gendag"
)

// TestRunUnderALowFileLimit: pipec run --parallel 64 of the 200-task
// benchmark DAG under an open-file limit of 32 (prlimit --nofile, a real
// limit on a real process). Each running task holds files of pipec's (its
// output pipe, its pidfd): as many at once as the DAG allows ran pipec out
// of them, and tasks failed to start ("too many open files", class start,
// not retried). pipec now runs as many at once as the limit allows, saying
// so, and the run succeeds.
func TestRunUnderALowFileLimit(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) is not installed; .ci/run installs it")
	}
	dag, err := gendag.Generate(200, 42)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := dag.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prlimit, "--nofile=32:32", pipecBin, "run", "pipeline.hcl", "--interval", "2024-01-01", "--parallel", "64")
	cmd.Dir = dir
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	if err != nil {
		t.Fatalf("the run under the limit: %v\n%s", err, tail(out, 25))
	}
	if !strings.Contains(out, "pipec run: 1 task(s) at once, not 64: the open-file limit (ulimit -n) is 32") {
		t.Errorf("the run did not say it runs fewer tasks at once:\n%s", tail(out, 25))
	}
	if strings.Contains(out, "too many open files") {
		t.Errorf("pipec ran out of files:\n%s", out)
	}
}
