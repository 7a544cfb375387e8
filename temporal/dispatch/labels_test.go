package dispatch_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/runtime/store"
)

// Labels are task queues: a task with labels = ["spark"] goes on the queue
// pipec.tasks+spark, which only workers offering spark poll; the task
// without labels runs on either worker.
func TestLabelsAreTaskQueues(t *testing.T) {
	e := newEnv(t, pairSpec("pair", "\n    labels  = [\"spark\"]"), pairFiles)
	e.worker("w1")
	e.worker("w2", "--label", "spark")
	code, run, out := e.submit("2024-01-01", true)
	if code != 0 || !strings.Contains(out, "run pair/2024-01-01/r1 succeeded") {
		t.Fatalf("submit --wait: exit %d\n%s", code, out)
	}
	if as := e.attempts(run, "clean"); len(as) != 1 || as[0].Worker != "w2" || as[0].State != store.AttemptSucceeded {
		t.Fatalf("clean's attempts %+v: want one, on w2 (the only worker offering spark)", as)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "warehouse", "2024-01-01", "data.csv")); err != nil {
		t.Fatal(err)
	}
}
