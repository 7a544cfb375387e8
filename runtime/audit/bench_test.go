package audit

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipec/pipec/compiler"
)

// BenchmarkUniqueLargeCSV audits a generated CSV (PIPEC_BENCH_CSV_MB
// megabytes, 32 by default; 200 for the figure) with a unique check
// on its id column and reports the peak Go heap during the audit
// (peak-heap-MB, sampled every 5 ms) beside the file's size (csv-MB). With
// the keys hashed and spilled, the heap stays a few MB whatever the size.
//
//	PIPEC_BENCH_CSV_MB=200 go test ./runtime/audit -run '^$' -bench UniqueLargeCSV -benchtime 1x
func BenchmarkUniqueLargeCSV(b *testing.B) {
	mb := 32
	if s := os.Getenv("PIPEC_BENCH_CSV_MB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("PIPEC_BENCH_CSV_MB=%q", s)
		}
		mb = n
	}
	dir := b.TempDir()
	size := writeCSV(b, filepath.Join(dir, "big.csv"), int64(mb)<<20)
	c := compiler.PlanCheck{Name: "u", Input: "big", Unique: []string{"id"}, RowCountMin: new(int)}
	b.ResetTimer()
	var peak atomic.Uint64
	for i := 0; i < b.N; i++ {
		runtime.GC()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ms runtime.MemStats
			for {
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
		res, err := Run(context.Background(), c, dir, Options{})
		close(stop)
		wg.Wait()
		if err != nil || !res.Accepted {
			b.Fatalf("%+v %v", res, err)
		}
	}
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(size)/(1<<20), "csv-MB")
}

// writeCSV writes about size bytes of distinct-id rows and returns the size.
func writeCSV(b *testing.B, path string, size int64) int64 {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	n, _ := fmt.Fprintln(w, "id,customer,amount,ordered_at")
	written := int64(n)
	for i := 0; written < size; i++ {
		n, _ := fmt.Fprintf(w, "order-%012d,customer-%06d,%d.%02d,2024-01-01T%02d:00:00Z\n", i, i%100000, i%997, i%100, i%24)
		written += int64(n)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	return written
}
