package dispatch_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/runtime/store"
)

// TestRunOnTemporal: a run submitted through Temporal runs on two workers
// polling it, task by task as the DAG says; submit --wait exits 0; the
// published file is the producer's data; the state holds the run, its
// attempts (with their tokens) and the workers.
func TestRunOnTemporal(t *testing.T) {
	e := newEnv(t, pairSpec("pair", ""), pairFiles)
	e.worker("w1")
	e.worker("w2")
	code, run, out := e.submit("2024-01-01", true)
	if code != 0 {
		t.Fatalf("submit --wait: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "run pair/2024-01-01/r1 succeeded") {
		t.Fatalf("submit --wait output:\n%s", out)
	}
	if r := e.until(run); r.State != store.RunSucceeded {
		t.Fatalf("run %s in the state: %s", run, r.State)
	}
	b, err := os.ReadFile(filepath.Join(e.dir, "warehouse", "2024-01-01", "data.csv"))
	if err != nil || !strings.HasPrefix(string(b), "id,worker\n1,w") {
		t.Fatalf("published data %q, %v", b, err)
	}
	for _, task := range []string{"extract", "clean"} {
		as := e.attempts(run, task)
		if len(as) != 1 || as[0].State != store.AttemptSucceeded || as[0].Token == 0 || !strings.HasPrefix(as[0].Worker, "w") {
			t.Fatalf("%s's attempts: %+v", task, as)
		}
	}
	code, out = e.run(pipecBin, "workers", "--state", e.url)
	if code != 0 || !strings.Contains(out, "w1") || !strings.Contains(out, "w2") || !strings.Contains(out, "temporal") {
		t.Fatalf("pipec workers: exit %d\n%s", code, out)
	}
	e.replay("pair", "2024-01-01", "succeeded")
}

// pipec worker --engine and pipec submit --engine (PIPEC_ENGINE alike) run
// the same through pipec-temporal beside pipec: the worker's SIGTERM
// reaches it (it replaced pipec's process).
func TestPipecEngineFlag(t *testing.T) {
	e := newEnv(t, pairSpec("pair", ""), pairFiles)
	w := e.workerOf(pipecBin, "w1", "--label", "a,b")
	code, out := e.run(pipecBin, "submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--engine", e.engine, "--wait")
	if code != 0 || !strings.Contains(out, "run pair/2024-01-01/r1 succeeded") {
		t.Fatalf("pipec submit --engine --wait: exit %d\n%s", code, out)
	}
	code, out = e.run(pipecBin, "workers", "--state", e.url)
	if code != 0 || !strings.Contains(out, "a,b,temporal") {
		t.Fatalf("pipec workers: exit %d\n%s", code, out)
	}
	interrupt(t, w)
	if !strings.Contains(w.Output(), "worker w1 stopped") {
		t.Fatalf("the worker did not stop gracefully:\n%s", w.Output())
	}
	// --due is pipec's own command on Temporal too (due_test.go): its
	// usage errors are pipec's.
	code, out = e.run(pipecBin, "submit", "pipeline.hcl", "--interval", "2024-01-02", "--engine", e.engine, "--due")
	if code != 2 || !strings.Contains(out, "--due decides the intervals itself: it takes neither --interval nor --force") {
		t.Fatalf("pipec submit --engine --due --interval: exit %d\n%s", code, out)
	}
}
