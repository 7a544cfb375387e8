package lint

import (
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"testing"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
	"github.com/pipec/pipec/spec/specload"
)

// benchPipeline builds, in memory, the shape of internal/gendag's DAG: task
// i depends on 1 to 3 random earlier tasks, every 10th task outputs an
// artifact a later one may read, every 7th is retried, the last output is
// checked and published. Building it directly keeps the benchmark about lint,
// not about the loaders.
func benchPipeline(n int) *spec.Pipeline {
	r := rand.New(rand.NewSource(42))
	at := func(line int) diag.Range {
		return diag.Range{Filename: "bench.hcl", Start: diag.Pos{Line: line, Column: 5}, End: diag.Pos{Line: line, Column: 20}}
	}
	p := &spec.Pipeline{Name: "bench", File: "bench.hcl", NameRange: at(1), Range: at(1),
		Schedule: &spec.Schedule{Range: at(2), Every: 24 * 3600e9, Start: fixedNow.AddDate(-2, 0, 0)},
		Errors:   []spec.ErrorClass{{Named: spec.Named{Name: "transient", NameRange: at(3)}, ExitCodes: []int{75}}},
		Retries: []spec.RetryPolicy{{Named: spec.Named{Name: "default", NameRange: at(4)}, MaxAttempts: 3,
			Multiplier: 2, Jitter: spec.JitterFull, On: []spec.Ref{{Name: "transient", Range: at(5)}}}},
	}
	p.Retries[0].Set("max_attempts", at(4))
	var pending []string
	line := 10
	for i := range n {
		line += 6
		t := spec.Task{Named: spec.Named{Name: fmt.Sprintf("t%d", i), NameRange: at(line), Range: at(line)},
			Command: []string{"true"}, Timeout: 60e9}
		t.Set("command", at(line+1))
		if i > 0 {
			seen := map[int]bool{}
			for range 1 + r.Intn(3) {
				d := r.Intn(i)
				if !seen[d] {
					seen[d] = true
					t.DependsOn = append(t.DependsOn, spec.Ref{Name: fmt.Sprintf("t%d", d), Range: at(line + 2)})
				}
			}
			if len(pending) > 0 && r.Intn(5) == 0 {
				t.Inputs = append(t.Inputs, spec.Input{Artifact: pending[0], Range: at(line + 3)})
				pending = pending[1:]
			}
		}
		if i%10 == 0 || i == n-1 {
			a := fmt.Sprintf("a%d", i)
			if i == n-1 {
				a = "final"
			}
			t.Outputs = append(t.Outputs, spec.Ref{Name: a, Range: at(line + 4)})
			pending = append(pending, a)
		}
		if i%7 == 0 {
			t.Retry = &spec.Ref{Name: "default", Range: at(line + 5)}
		}
		p.Tasks = append(p.Tasks, t)
	}
	one := 1
	p.Checks = []spec.Check{{Named: spec.Named{Name: "final_ok", NameRange: at(line + 10)}, Input: spec.Ref{Name: "final", Range: at(line + 11)}, RowCountMin: &one}}
	p.Sinks = []spec.Sink{{Named: spec.Named{Name: "out", NameRange: at(line + 12)}, Type: "directory", Path: "warehouse/bench", Fencing: spec.FencingToken}}
	p.Publishes = []spec.Publish{{Named: spec.Named{Name: "final_out", NameRange: at(line + 13)},
		Artifact: spec.Ref{Name: "final", Range: at(line + 14)}, Sink: spec.Ref{Name: "out", Range: at(line + 15)}}}
	return p
}

// BenchmarkLint runs every rule over a compiled pipeline of 1k, 10k and 100k
// tasks. Loading and compiling are outside the timer.
func BenchmarkLint(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			// Built inside the sub-benchmark, so the live heap (which every
			// GC cycle scans) holds only this size's pipeline.
			res, ds := compiler.Compile(benchPipeline(n))
			if ds.HasErrors() {
				b.Fatalf("bench pipeline does not compile: %v", ds[0])
			}
			src := []byte("pipeline \"bench\" {}\n")
			// Collect the setup's garbage now, or its GC cycle lands in the timing.
			runtime.GC()
			b.ReportAllocs()
			for b.Loop() {
				Run(res, src, Options{Now: fixedNow})
			}
		})
	}
}

// BenchmarkLintFile lints a spec file named by PIPEC_BENCH_SPEC (for example
// the output of go run ./bench/gendag -n 10000 -out DIR), timing
// the load, the compile and the rules separately.
func BenchmarkLintFile(b *testing.B) {
	file := os.Getenv("PIPEC_BENCH_SPEC")
	if file == "" {
		b.Skip("set PIPEC_BENCH_SPEC to a spec file")
	}
	src, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	syn, _ := spec.SyntaxOf(file)
	p, _ := specload.Load(syn, file, src)
	res, _ := compiler.Compile(p)
	b.Run("load", func(b *testing.B) {
		for b.Loop() {
			specload.Load(syn, file, src)
		}
	})
	b.Run("compile", func(b *testing.B) {
		for b.Loop() {
			compiler.Compile(p)
		}
	})
	b.Run("rules", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Run(res, src, Options{Now: fixedNow})
		}
	})
}

func TestBenchPipelineIsClean(t *testing.T) {
	res, ds := compiler.Compile(benchPipeline(200))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	for _, d := range Run(res, nil, Options{Now: fixedNow}) {
		switch d.Rule {
		case "unused-artifact", "retry-storm":
		default:
			t.Errorf("unexpected finding on the bench pipeline: %s", d)
		}
	}
}
