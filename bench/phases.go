//go:build ignore

// phases shows where `pipec lint` spends its time on one spec, phase by phase,
// in one process: reading, the stock HCL or CUE parser alone (hclparse, the
// reference the issue measures against), loading into the model, compiling,
// every lint rule, and printing. For each phase it prints the best wall and
// CPU times of -n runs, and the bytes allocated and garbage collections of one
// run, so an optimisation starts from a measurement. It is build-ignored:
// `go install ./...` never builds it.
//
//	go run bench/phases.go -n 5 -cpuprofile /tmp/lint.pprof /tmp/pipec-bench/10000/pipeline.hcl
//	go tool pprof -top /tmp/lint.pprof
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	cueparser "cuelang.org/go/cue/parser"
	"github.com/hashicorp/hcl/v2/hclparse"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/report"
	"github.com/pipec/pipec/spec"
	"github.com/pipec/pipec/spec/specload"
)

func main() {
	n := flag.Int("n", 5, "runs per phase (best is shown)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of -n whole lints to `file`")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: go run bench/phases.go [-n N] [-cpuprofile FILE] SPEC")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *n, *cpuprofile); err != nil {
		fmt.Fprintln(os.Stderr, "phases:", err)
		os.Exit(1)
	}
}

// cpuTime is the user+system time this process has used, every thread and
// the garbage collector included.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs f n times and prints its best wall and CPU times (CPU time is
// the steadier figure on a shared machine, and shows parallel work), with the
// allocation and GC figures of the first run.
func measure(name string, n int, f func() error) error {
	var before, after runtime.MemStats
	best, bestCPU := time.Duration(-1), time.Duration(-1)
	for i := range n {
		if i == 0 {
			runtime.GC()
			runtime.ReadMemStats(&before)
		}
		t0, c0 := time.Now(), cpuTime()
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		d, c := time.Since(t0), cpuTime()-c0
		if i == 0 {
			runtime.ReadMemStats(&after)
		}
		if best < 0 || d < best {
			best = d
		}
		if bestCPU < 0 || c < bestCPU {
			bestCPU = c
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	fmt.Printf("%-28s %9.1f ms wall %9.1f ms cpu %8.1f MiB %4d GCs\n", name, ms(best), ms(bestCPU),
		float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), after.NumGC-before.NumGC)
	return nil
}

func run(path string, n int, cpuprofile string) error {
	syn, ok := spec.SyntaxOf(path)
	if !ok {
		return fmt.Errorf("%s: not a spec file (want .hcl or .cue)", path)
	}
	var src []byte
	var p *spec.Pipeline
	var res *compiler.Result
	var found diag.Diagnostics
	fmt.Printf("%s, GOMAXPROCS=%d, best of %d\n", path, runtime.GOMAXPROCS(0), n)
	steps := []struct {
		name string
		f    func() error
	}{
		{"read", func() (err error) { src, err = os.ReadFile(path); return err }},
		{"stock parser alone", func() error {
			if syn == spec.SyntaxHCL {
				if _, ds := hclparse.NewParser().ParseHCL(src, path); ds.HasErrors() {
					return ds
				}
				return nil
			}
			_, err := cueparser.ParseFile(path, src, cueparser.ParseComments)
			return err
		}},
		{"load (spec." + string(syn) + ")", func() error {
			var ds diag.Diagnostics
			p, ds = specload.Load(syn, path, src)
			if p == nil {
				return fmt.Errorf("nothing loaded: %v", ds)
			}
			found = ds
			return nil
		}},
		{"compile", func() error { res, _ = compiler.Compile(p); return nil }},
		{"lint (every rule)", func() error { lint.Run(res, src, lint.Options{}); return nil }},
		{"print (text)", func() error {
			return report.Text(io.Discard, found, report.Sources{path: src}, report.TextOptions{})
		}},
	}
	for _, s := range steps {
		if err := measure(s.name, n, s.f); err != nil {
			return err
		}
	}
	whole := func() error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		p, ds := specload.Load(syn, path, b)
		if p != nil {
			r, cds := compiler.Compile(p)
			ds = append(ds, cds...)
			ds = append(ds, lint.Run(r, b, lint.Options{})...)
		}
		return report.Text(io.Discard, ds.Sort(), report.Sources{path: b}, report.TextOptions{})
	}
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	return measure("whole lint, in process", n, whole)
}
