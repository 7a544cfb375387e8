package lsp

import (
	"os"
	"testing"

	"github.com/pipec/pipec/config"
	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/spec"
	"github.com/pipec/pipec/spec/cuespec"
)

// BenchmarkAnalyze measures one analysis in process, the work between a
// change and its diagnostics without the protocol, so a CPU profile shows
// where it goes:
//
//	PIPEC_BENCH_SPEC=DIR/pipeline.hcl go test -run '^$' -bench Analyze -cpuprofile cpu.out ./lsp/
func BenchmarkAnalyze(b *testing.B) {
	path := os.Getenv("PIPEC_BENCH_SPEC")
	if path == "" {
		path = "../examples/orders/pipeline.hcl"
	}
	src, err := os.ReadFile(path)
	if err != nil {
		b.Skip(err)
	}
	syn, ok := spec.SyntaxOf(path)
	if !ok {
		b.Skipf("%s: not a spec file", path)
	}
	chunks := cuespec.NewChunkCache() // as Serve keeps one
	for b.Loop() {
		if a := analyze(path, syn, src, lint.Options{}, &config.Config{}, chunks); !a.pipeline {
			b.Fatal("not analysed as a pipeline")
		}
	}
}
