package sink

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/s3test"
	"github.com/pipec/pipec/runtime/store"
)

// BenchmarkPublishSmallVersions publishes small versions (two 30-byte CSV
// files) one after another, each to its own interval, to the directory sink
// and to the s3 sink (versitygw on loopback, serving a local folder), and
// reads each back as a reader does (resolve the visible version once, read
// its files). Producing the version (the attempt, staging, the state's
// records) is outside the timer. The s3 sink reports its HTTP round trips
// per publish and per read. Run with -benchtime=1000x for the 1,000 of the
// note:
//
//	go test ./runtime/sink -run '^$' -bench PublishSmallVersions -benchtime=1000x
func BenchmarkPublishSmallVersions(b *testing.B) {
	b.Run("directory", func(b *testing.B) {
		f := newFixture(b)
		d := f.sink(b, f.st, FencingToken)
		benchPublish(b, f, d, func(ctx context.Context, interval string) error {
			dir, err := d.Visible(interval)
			if err != nil {
				return err
			}
			for _, name := range versionFiles {
				if _, err := os.ReadFile(filepath.Join(dir, name)); err != nil {
					return err
				}
			}
			return nil
		}, nil)
	})
	b.Run("s3", func(b *testing.B) {
		s3test.Start(b, "lake")
		f := newFixture(b)
		s := f.s3sink(b, f.st, FencingToken)
		var published, read int64
		benchPublish(b, f, s, func(ctx context.Context, interval string) error {
			before := s.Client.RoundTrips()
			_, files, err := readS3(ctx, s, interval)
			read += s.Client.RoundTrips() - before
			if err == nil && len(files) != len(versionFiles) {
				err = fmt.Errorf("read %d files", len(files))
			}
			return err
		}, func(trips int64) { published += trips })
		b.ReportMetric(float64(published)/float64(b.N), "trips/publish")
		b.ReportMetric(float64(read)/float64(b.N), "trips/read")
	})
}

func benchPublish(b *testing.B, f *fixture, s Sink, read func(context.Context, string) error, trips func(int64)) {
	ctx := context.Background()
	var client interface{ RoundTrips() int64 }
	if s3, ok := s.(*S3); ok {
		client = s3.Client
		// The probe is once per process: not a publish's cost.
		if err := s3.probe(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		interval := fmt.Sprintf("2024-01-01-%06d", i)
		v := f.produce(b, f.st, "clean", interval, filesOf(versionContent(i, 0)))
		b.StartTimer()
		var before int64
		if client != nil {
			before = client.RoundTrips()
		}
		res, err := s.Publish(ctx, v)
		if err != nil || res.Outcome != store.Won {
			b.Fatalf("publish %d: %+v, %v", i, res, err)
		}
		if client != nil {
			trips(client.RoundTrips() - before)
		}
		if err := read(ctx, interval); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFreezeManyFiles freezes one output of 200 files of 8 KiB in two
// folders, then in 100, as partitioned datasets are written, into a fresh
// root each time:
// the copy, its digest and the fsyncs that make the version durable. Where
// the test's temporary folder lies decides most of it (TMPDIR=DIR):
//
//	go test ./runtime/sink -run '^$' -bench FreezeManyFiles
func BenchmarkFreezeManyFiles(b *testing.B) {
	const files, size = 200, 8 << 10
	for _, folders := range []int{2, 100} {
		b.Run(fmt.Sprintf("folders=%d", folders), func(b *testing.B) {
			staging := b.TempDir()
			content := map[string]string{}
			for i := range files {
				content[fmt.Sprintf("part=%d/f%03d.csv", i%folders, i)] = fmt.Sprintf("%0*d", size, i)
			}
			if err := writeFiles(staging, content); err != nil {
				b.Fatal(err)
			}
			roots := b.TempDir()
			b.SetBytes(files * size)
			b.ResetTimer()
			for i := range b.N {
				if _, _, err := Freeze(staging, filepath.Join(roots, strconv.Itoa(i))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReconcileSettled is what every run's start pays for a sink
// that holds many intervals and needs nothing (a backfill's later runs):
// ReconcileAll of the directory sink and of the s3 sink (versitygw on
// loopback) after 365 daily intervals were published, on an SQLite state.
//
//	go test ./runtime/sink -run '^$' -bench ReconcileSettled
func BenchmarkReconcileSettled(b *testing.B) {
	const intervals = 365
	publishAll := func(b *testing.B, f *fixture, s Sink) {
		b.Helper()
		day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		for i := range intervals {
			iv := day.AddDate(0, 0, i).Format(time.DateOnly)
			if _, err := s.Publish(context.Background(), f.produce(b, f.st, "clean", iv, filesOf(iv+"\n"))); err != nil {
				b.Fatal(err)
			}
		}
	}
	// before, when set, runs before each reconcile, timed with it.
	reconcile := func(b *testing.B, s Sink, before ...func()) {
		b.Helper()
		b.ResetTimer()
		for range b.N {
			for _, fn := range before {
				fn()
			}
			if n, err := s.ReconcileAll(context.Background()); err != nil || n != 0 {
				b.Fatalf("reconcile of a settled sink: %d, %v", n, err)
			}
		}
	}
	b.Run("directory", func(b *testing.B) {
		f := newFixture(b)
		d := f.sink(b, f.st, FencingToken)
		publishAll(b, f, d)
		reconcile(b, d)
	})
	// As a backfill's later runs pay it (Directory.Shown): "shown", the
	// sink seen settled by an earlier run of the process, at the
	// generation of its pointers the store still holds; "shown-moved",
	// another process having moved a pointer since, so that the sink is
	// read but not the links seen shown before.
	for _, moved := range []bool{false, true} {
		name := "directory-shown"
		if moved {
			name += "-moved"
		}
		b.Run(name, func(b *testing.B) {
			f := newFixture(b)
			d := f.sink(b, f.st, FencingToken)
			publishAll(b, f, d)
			d.Shown = new(Shown)
			reconcile(b, d, func() {
				if moved {
					d.Shown.settled = nil
				}
			})
		})
	}
	b.Run("s3", func(b *testing.B) {
		s3test.Start(b, "lake")
		f := newFixture(b)
		s := f.s3sink(b, f.st, FencingToken)
		publishAll(b, f, s)
		reconcile(b, s)
	})
}
