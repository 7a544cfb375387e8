package compiler_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/internal/gendag"
	"github.com/pipec/pipec/spec/specload"
)

// BenchmarkLoadAndCompileGendag measures what `pipec compile` does on the
// benchmark DAG (internal/gendag, seed 42): load the spec, HCL and CUE, then
// compile it, at 1k, 10k and 100k tasks.
//
//	go test -run '^$' -bench LoadAndCompileGendag -benchtime 3x ./compiler/
func BenchmarkLoadAndCompileGendag(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		d, err := gendag.Generate(n, 42)
		if err != nil {
			b.Fatal(err)
		}
		dir := b.TempDir()
		if err := d.WriteFiles(dir); err != nil {
			b.Fatal(err)
		}
		for _, file := range []string{"pipeline.hcl", "pipeline.cue"} {
			path := filepath.Join(dir, file)
			b.Run(fmt.Sprintf("%s/tasks=%d", file, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					p, _, ds, err := specload.LoadFile(path)
					if err != nil || ds.HasErrors() {
						b.Fatalf("load: %v %v", err, ds)
					}
					if _, ds := compiler.Compile(p); ds.HasErrors() {
						b.Fatal(ds[0])
					}
				}
			})
		}
	}
}
