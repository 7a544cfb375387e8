package cuespec

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// cueGenSpec writes an n-task pipeline in the shape of the benchmark DAG
// (internal/gendag), without its check and publish: every task on one line, 1 to 3 dependencies on
// earlier tasks, every 10th task producing an artifact a later one reads.
func cueGenSpec(n int) []byte {
	r := rand.New(rand.NewSource(42))
	var b strings.Builder
	b.WriteString("pipeline: bench: {\n\tcode_version: \"1\"\n")
	b.WriteString("\tschedule: {every: \"24h\", start: \"2024-01-01T00:00:00Z\", catchup: false}\n")
	b.WriteString("\terror: transient: {exit_codes: [75]}\n")
	b.WriteString("\tretry: default: {max_attempts: 3, initial: \"1s\", multiplier: 2, max_delay: \"1m\", jitter: \"full\", max_elapsed: \"10m\", on: [\"transient\"]}\n")
	var pending []string
	for i := range n {
		fields := []string{`command: ["true"]`, `timeout: "1m"`}
		if i > 0 {
			deps := map[int]bool{}
			for range 1 + r.Intn(3) {
				deps[r.Intn(i)] = true
			}
			var names []string
			for d := range i {
				if deps[d] {
					names = append(names, fmt.Sprintf("%q", fmt.Sprintf("t%d", d)))
				}
			}
			fields = append(fields, "depends_on: ["+strings.Join(names, ", ")+"]")
		}
		if len(pending) > 0 && r.Intn(5) == 0 {
			fields = append(fields, fmt.Sprintf("inputs: [%q]", pending[0]))
			pending = pending[1:]
		}
		if i%10 == 0 {
			a := fmt.Sprintf("a%d", i)
			fields = append(fields, fmt.Sprintf("outputs: [%q]", a))
			pending = append(pending, a)
		}
		if i%7 == 0 {
			fields = append(fields, `retry: "default"`)
		}
		fmt.Fprintf(&b, "\ttask: t%d: {%s}\n", i, strings.Join(fields, ", "))
	}
	b.WriteString("\tsink: out: {type: \"directory\", path: \"warehouse/bench\", fencing: \"token\"}\n}\n")
	return []byte(b.String())
}

// BenchmarkLoadCUE loads generated specs of 1,000 and 10,000 tasks:
// parse, evaluation with the schema, decoding. "plain" specs take the fast
// path (merged, chunked, read from the syntax tree); "evaluated" ones, the
// same spec with one hidden field, are evaluated whole and read back from
// the evaluated value.
func BenchmarkLoadCUE(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		plain := cueGenSpec(n)
		for _, c := range []struct {
			name string
			src  []byte
		}{
			{"plain", plain},
			{"evaluated", append([]byte("_generated: true\n"), plain...)},
		} {
			b.Run(fmt.Sprintf("tasks=%d/%s", n, c.name), func(b *testing.B) {
				b.SetBytes(int64(len(c.src)))
				b.ReportAllocs()
				for b.Loop() {
					p, ds := LoadCUE("bench.cue", c.src)
					if len(ds) > 0 || p == nil || len(p.Tasks) != n {
						b.Fatalf("load failed: %v", ds)
					}
				}
			})
		}
	}
}

// BenchmarkLoadCUECached loads a 10,000-task spec with the chunk cache on,
// as the language server does on every change, each time with a new value in
// one task (its timeout): a load evaluates the one chunk (of ten) holding
// that task and finds the other nine in the cache.
func BenchmarkLoadCUECached(b *testing.B) {
	cache := NewChunkCache()
	src := string(cueGenSpec(10000))
	const task = `task: t5000: {command: ["true"], timeout: "1m"`
	if !strings.Contains(src, task) {
		b.Fatal("no task to edit")
	}
	LoadCUECached("bench.cue", []byte(src), cache) // fill the cache
	b.ReportAllocs()
	var evaluated int64
	i := 0
	for b.Loop() {
		i++
		edited := strings.Replace(src, task, fmt.Sprintf(`task: t5000: {command: ["true"], timeout: "%dm"`, i+1), 1)
		l := &cueLoader{file: "bench.cue", src: []byte(edited), cache: cache}
		p := l.load()
		if len(l.ds) > 0 || p == nil || len(p.Tasks) != 10000 {
			b.Fatalf("load failed: %v", l.ds)
		}
		evaluated += l.evaluations.Load()
	}
	b.ReportMetric(float64(evaluated)/float64(i), "chunks-evaluated/op")
}
