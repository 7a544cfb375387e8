package runtime

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store/sqlite"
)

// dagHCL is a random DAG shaped like internal/gendag's: task i
// depends on 1 to 3 earlier tasks, every task runs `true`, the last one writes
// the artifact a check accepts and a publish makes visible.
func dagHCL(n int) string {
	r := rand.New(rand.NewPCG(42, 42))
	var b strings.Builder
	b.WriteString("pipeline \"bench\" {\n  schedule {\n    every = \"24h\"\n    start = \"2024-01-01T00:00:00Z\"\n  }\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  task \"t%d\" {\n", i)
		if i == n-1 {
			b.WriteString("    command = [\"sh\", \"-c\", \"printf 'id\\\\n1\\\\n' > \\\"$PIPEC_OUTPUT_final/final.csv\\\"\"]\n    outputs = [\"final\"]\n")
		} else {
			b.WriteString("    command = [\"true\"]\n")
		}
		if i > 0 {
			seen := map[int]bool{}
			var deps []string
			for k := 1 + r.IntN(3); k > 0; k-- {
				d := r.IntN(i)
				if !seen[d] {
					seen[d] = true
					deps = append(deps, fmt.Sprintf("%q", fmt.Sprintf("t%d", d)))
				}
			}
			fmt.Fprintf(&b, "    depends_on = [%s]\n", strings.Join(deps, ", "))
		}
		b.WriteString("  }\n")
	}
	b.WriteString("  check \"final_ok\" {\n    input         = \"final\"\n    row_count_min = 1\n  }\n")
	b.WriteString("  sink \"out\" {\n    type    = \"directory\"\n    path    = \"warehouse/bench\"\n    fencing = \"token\"\n  }\n")
	b.WriteString("  publish \"final_out\" {\n    artifact = \"final\"\n    sink     = \"out\"\n  }\n}\n")
	return b.String()
}

// BenchmarkRunDAG runs a 200-task DAG of `true` commands with the durable
// store, once per iteration in a fresh state directory. The full comparison
// with make -j2 on the 1,000-task DAG is in the benchmark script.
func BenchmarkRunDAG(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "pipeline.hcl")
	if err := os.WriteFile(path, []byte(dagHCL(200)), 0o644); err != nil {
		b.Fatal(err)
	}
	t := &testing.T{}
	plan := compilePlan(t, path)
	b.ResetTimer()
	before := selfCPU()
	for i := 0; i < b.N; i++ {
		// A fresh folder per run: its own state and its own sink (a sink is
		// bound to the state that first published to it).
		base := filepath.Join(dir, fmt.Sprint(i))
		state := filepath.Join(base, "state.db")
		st, err := sqlite.Open(context.Background(), state, sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		sum, err := Run(context.Background(), Options{Plan: plan, BaseDir: base, Interval: "2024-01-01", Store: st,
			StatePath: state, Environ: os.Environ(), Parallel: 2, Force: true})
		if err != nil || sum.Failed {
			b.Fatalf("run failed: %v", err)
		}
		st.Close()
	}
	// pipec's own CPU, without its children's: on a shared machine the
	// steadier figure, and the part of a run that is pipec's to cut.
	b.ReportMetric(float64(selfCPU()-before)/float64(b.N)/1e6, "self-cpu-ms/op")
}

// selfCPU is this process's user and system CPU time so far, children
// excluded.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
