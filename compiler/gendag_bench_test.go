package compiler_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/spec"
)

// BenchmarkLoadAndCompileGendag measures what `pipec compile` does on the
// shared benchmark DAG (../shared/bench/gendag.go): load the HCL spec, then
// compile it, at 1k, 10k and 100k tasks.
//
//	go test -run x -bench LoadAndCompileGendag -benchtime 3x ./compiler/
func BenchmarkLoadAndCompileGendag(b *testing.B) {
	gen := filepath.Join("..", "..", "shared", "bench", "gendag.go")
	if _, err := os.Stat(gen); err != nil {
		b.Skipf("no %s beside the repository", gen)
	}
	for _, n := range []int{1000, 10000, 100000} {
		dir := b.TempDir()
		out, err := exec.Command("go", "run", gen, "-n", fmt.Sprint(n), "-out", dir).CombinedOutput()
		if err != nil {
			b.Fatalf("gendag: %v\n%s", err, out)
		}
		for _, file := range []string{"pipeline.hcl", "pipeline.cue"} {
			path := filepath.Join(dir, file)
			b.Run(fmt.Sprintf("%s/tasks=%d", file, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					p, _, ds, err := spec.LoadFile(path)
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
