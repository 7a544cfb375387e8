package worker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/gendag"
)

// dag1kTasks is how many tasks dag1k has.
const dag1kTasks = 1000

// dag1k is the spec of the 1,000-task benchmark DAG (internal/gendag, seed
// 42), the one bench/run1k.sh measures.
func dag1k(b *testing.B) []byte {
	b.Helper()
	d, err := gendag.Generate(dag1kTasks, 42)
	if err != nil {
		b.Fatal(err)
	}
	return d.HCL()
}

// BenchmarkWorkers1kSQLite runs the same DAG as BenchmarkWorkers1k through
// 3 pipec worker processes sharing one SQLite file (one slot each) and,
// side by side in each iteration, the same local pipec run --parallel 3,
// and reports as BenchmarkWorkers1k does.
//
//	go test -run '^$' -bench Workers1kSQLite -benchtime 2x ./runtime/worker/
func BenchmarkWorkers1kSQLite(b *testing.B) {
	spec := dag1k(b)
	var pairs walls
	cpu := benchCPU{job: oneRun()}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		local := cpu.localRun(b, spec)
		e := newEnvOn(b, onSQLite, string(spec), nil)
		var ws []*proc
		for _, name := range []string{"w1", "w2", "w3"} {
			if dir := os.Getenv("PIPEC_BENCH_PROFILE"); dir != "" { // as BenchmarkWorkers1k
				prof := filepath.Join(dir, fmt.Sprintf("sqlite-%s-%d.pprof", name, i))
				ws = append(ws, e.workerWith(hookPipec(b), []string{"PIPEC_TEST_CPUPROFILE=" + prof}, name))
				continue
			}
			ws = append(ws, e.worker(name))
		}
		b.StartTimer()
		start := time.Now()
		code, out := cpu.follow(b, e, ws, 0)
		pairs.add(local, time.Since(start))
		b.StopTimer()
		if code != 0 {
			b.Fatalf("submit --wait: exit %d\n%s", code, out)
		}
		for _, w := range ws {
			w.Signal(b, syscall.SIGTERM)
		}
	}
	reportBeside(b, dag1kTasks, pairs, &cpu)
}
