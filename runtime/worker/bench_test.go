package worker_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkWorkers1k runs the 1,000-task DAG of internal/gendag
// through 3 pipec worker processes on PostgreSQL (one slot each) and, side
// by side in each iteration, a local pipec run of the same DAG on SQLite
// with --parallel 3. It reports both walls, their ratio (the target
// is at most 3×) and attempts per second on each store.
//
//	go test -run x -bench Workers1k -benchtime 3x ./runtime/worker/
func BenchmarkWorkers1k(b *testing.B) {
	spec := dag1k(b)
	// PIPEC_BENCH_SLOTS sets each worker's --slots (1 by default: three
	// tasks at once, as the local run's --parallel 3).
	slots := os.Getenv("PIPEC_BENCH_SLOTS")
	if slots == "" {
		slots = "1"
	}
	// PIPEC_BENCH_PROFILE=DIR runs the workers from a test build of pipec
	// that writes a CPU profile each (DIR/wN-i.pprof; go tool pprof -top
	// DIR/*.pprof merges them).
	profDir := os.Getenv("PIPEC_BENCH_PROFILE")
	var local, workers time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// Local run on SQLite.
		ldir := b.TempDir()
		if err := os.WriteFile(filepath.Join(ldir, "pipeline.hcl"), spec, 0o644); err != nil {
			b.Fatal(err)
		}
		run := exec.Command(pipecBin, "run", "pipeline.hcl", "--interval", "2024-01-01", "--parallel", "3")
		run.Dir = ldir
		run.Env = append(os.Environ(), "PIPEC_STATE=")
		start := time.Now()
		if out, err := run.CombinedOutput(); err != nil {
			b.Fatalf("local run: %v\n%s", err, out)
		}
		local += time.Since(start)

		// The same DAG through 3 workers on PostgreSQL.
		e := newEnv(b, string(spec), nil)
		var ws []*proc
		for _, name := range []string{"w1", "w2", "w3"} {
			if profDir != "" {
				prof := filepath.Join(profDir, fmt.Sprintf("%s-%d.pprof", name, i))
				ws = append(ws, e.workerWith(hookPipec(b), []string{"PIPEC_TEST_CPUPROFILE=" + prof}, name, "--slots", slots))
				continue
			}
			e.worker(name, "--slots", slots)
		}
		before, _ := pg.Server(b).Psql(b.Context(), "", "SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'")
		b.StartTimer()
		start = time.Now()
		code, out := e.pipec("submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "100ms")
		workers += time.Since(start)
		b.StopTimer()
		after, _ := pg.Server(b).Psql(b.Context(), "", "SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'")
		b.Logf("commits: %s -> %s", strings.TrimSpace(before), strings.TrimSpace(after))
		if code != 0 {
			b.Fatalf("submit --wait: exit %d\n%s", code, out)
		}
		for _, w := range ws {
			w.signal(b, syscall.SIGTERM) // the profile is written as it exits
		}
	}
	n := float64(b.N)
	b.ReportMetric(local.Seconds()/n, "local-s/op")
	b.ReportMetric(workers.Seconds()/n, "workers-s/op")
	b.ReportMetric(workers.Seconds()/local.Seconds(), "ratio")
	b.ReportMetric(1000*n/local.Seconds(), "local-attempts/s")
	b.ReportMetric(1000*n/workers.Seconds(), "workers-attempts/s")
}
