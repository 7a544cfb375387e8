package worker_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// dag1k is the spec of the 1,000-task DAG of ../shared/bench/gendag.go
// (seed 42), or skips the benchmark without it.
func dag1k(b *testing.B) []byte {
	b.Helper()
	shared := os.Getenv("PIPEC_SHARED")
	if shared == "" {
		shared = filepath.Join("..", "..", "..", "shared")
	}
	gendag, err := filepath.Abs(filepath.Join(shared, "bench", "gendag.go"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(gendag); err != nil {
		b.Skipf("no gendag.go (set PIPEC_SHARED): %v", err)
	}
	src := b.TempDir()
	gen := exec.Command("go", "run", gendag, "-n", "1000", "-seed", "42", "-out", src)
	gen.Dir = src
	if out, err := gen.CombinedOutput(); err != nil {
		b.Fatalf("gendag: %v\n%s", err, out)
	}
	spec, err := os.ReadFile(filepath.Join(src, "pipeline.hcl"))
	if err != nil {
		b.Fatal(err)
	}
	return spec
}

// BenchmarkWorkers1kSQLite runs the same DAG as BenchmarkWorkers1k through
// 3 pipec worker processes sharing one SQLite file (one slot each), and
// reports the wall and attempts per second.
//
//	go test -run x -bench Workers1kSQLite -benchtime 2x ./runtime/worker/
func BenchmarkWorkers1kSQLite(b *testing.B) {
	spec := dag1k(b)
	var wall time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := newEnvOn(b, onSQLite, string(spec), nil)
		for _, name := range []string{"w1", "w2", "w3"} {
			e.worker(name)
		}
		b.StartTimer()
		start := time.Now()
		code, out := e.pipec("submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "100ms")
		wall += time.Since(start)
		b.StopTimer()
		if code != 0 {
			b.Fatalf("submit --wait: exit %d\n%s", code, out)
		}
	}
	b.ReportMetric(wall.Seconds()/float64(b.N), "workers-s/op")
	b.ReportMetric(1000*float64(b.N)/wall.Seconds(), "workers-attempts/s")
}
