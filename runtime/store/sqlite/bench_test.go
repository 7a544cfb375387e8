package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
)

// seedVersions records n accepted versions of orders_clean@interval, each
// from its own attempt with the next token, in one transaction (setup, not
// what is measured), and returns them in token order.
func seedVersions(b *testing.B, s *Store, run, interval string, n int) []store.Version {
	b.Helper()
	out := make([]store.Version, 0, n)
	err := s.write(context.Background(), grants, func(ctx context.Context, tx *wtx) error {
		for i := 0; i < n; i++ {
			tok, err := s.grantToken(ctx, tx, "orders@"+interval)
			if err != nil {
				return err
			}
			// Each version the one attempt of a task of its own: a task's
			// later grant would fence its earlier versions (fence at grant).
			task := fmt.Sprintf("clean-%s-%d", interval, tok)
			if _, err := tx.ExecContext(ctx, `INSERT INTO attempts (run, task, number, resource, token, state) VALUES (?, ?, 1, ?, ?, 'succeeded')`,
				run, task, "orders@"+interval, tok); err != nil {
				return err
			}
			digest := fmt.Sprintf("sha256:%064x", tok)
			res, err := tx.ExecContext(ctx, `INSERT INTO versions (pipeline, artifact, interval_key, digest, run, task, attempt, token, code_version, location, state, created)
VALUES ('orders', 'orders_clean', ?, ?, ?, ?, 1, ?, '', '', 'accepted', 1)`, interval, digest, run, task, tok)
			if err != nil {
				return err
			}
			id, _ := res.LastInsertId()
			out = append(out, store.Version{ID: id, Pipeline: "orders", Artifact: "orders_clean", Interval: interval, Token: tok})
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkFencedPublish measures fenced compare-and-swaps of one pointer
// through the SQLite store with the durable setting (synchronous=FULL, one
// WAL fsync per commit): every swap wins with a higher token. "serial" is one
// publisher, bound by the disk's fsync latency; "handles" is four publishers
// with their own store handles on one file, one interval each, as concurrent
// pipec processes would be; "goroutines" is eight publishers sharing one
// handle, as the tasks of one run do, whose swaps share fsyncs through group
// commit.
func BenchmarkFencedPublish(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		s := openTest(b, filepath.Join(b.TempDir(), "state.db"), nil)
		run := newRun(b, s, "2024-01-01")
		ctx := context.Background()
		b.ResetTimer()
		var elapsed time.Duration // the swaps only, not the seeding
		var pool []store.Version
		for i := 0; i < b.N; i++ {
			if len(pool) == 0 {
				b.StopTimer()
				pool = seedVersions(b, s, run.ID, "2024-01-01", 1000)
				b.StartTimer()
			}
			v := pool[0]
			pool = pool[1:]
			t0 := time.Now()
			res, err := s.CompareAndSwapPointer(ctx, store.Swap{Pipeline: v.Pipeline, Sink: "warehouse", Artifact: v.Artifact, Interval: v.Interval, Version: v.ID, Token: v.Token})
			elapsed += time.Since(t0)
			if err != nil || res.Outcome != store.Won {
				b.Fatalf("swap %d: %+v, %v", i, res, err)
			}
		}
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "publishes/s")
	})
	b.Run("handles", func(b *testing.B) { concurrentPublish(b, 4, false) })
	b.Run("goroutines", func(b *testing.B) { concurrentPublish(b, 8, true) })
}

// concurrentPublish runs b.N swaps from several publishers, each on its own
// interval, through their own store handles or through one shared handle
// (where group commit lets them share fsyncs).
func concurrentPublish(b *testing.B, publishers int, shared bool) {
	path := filepath.Join(b.TempDir(), "state.db")
	s := openTest(b, path, nil)
	run := newRun(b, s, "2024-01-01")
	per := b.N/publishers + 1
	pools := make([][]store.Version, publishers)
	handles := make([]*Store, publishers)
	for p := range pools {
		pools[p] = seedVersions(b, s, run.ID, fmt.Sprintf("2024-01-%02d", p+1), per)
		handles[p] = s
		if !shared {
			handles[p] = openTest(b, path, nil)
		}
	}
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, publishers)
	for p := 0; p < publishers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, v := range pools[p] {
				res, err := handles[p].CompareAndSwapPointer(ctx, store.Swap{Pipeline: v.Pipeline, Sink: "warehouse", Artifact: v.Artifact, Interval: v.Interval, Version: v.ID, Token: v.Token})
				if err == nil && res.Outcome != store.Won {
					err = fmt.Errorf("outcome %s", res.Outcome)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(per*publishers)/elapsed.Seconds(), "publishes/s")
}

// BenchmarkAttemptLifecycle is the store's share of running one task: an
// attempt started (token granted) and finished, one version recorded and
// accepted. After the handle's first grant none of these fsync.
func BenchmarkAttemptLifecycle(b *testing.B) {
	s := openTest(b, filepath.Join(b.TempDir(), "state.db"), nil)
	run := newRun(b, s, "2024-01-01")
	ctx := context.Background()
	res := store.FenceResource("orders", "2024-01-01")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		task := fmt.Sprintf("t%d", i)
		a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: task, Resource: res, Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		v, err := s.RecordVersion(ctx, store.Version{Artifact: task, Interval: "2024-01-01", Digest: "sha256:00", Run: run.ID, Task: task, Attempt: a.Number})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.AcceptVersion(ctx, v.ID); err != nil {
			b.Fatal(err)
		}
		if err := s.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptSucceeded}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFsyncBaseline is the floor under BenchmarkFencedPublish/serial: one
// 4 KiB write in place and fsync of a file in the same kind of directory (as
// SQLite rewrites its WAL in place). A durable
// swap cannot return sooner than this, so serial publishes/s is bound by
// 1/fsync latency; only group commit (the "goroutines" case) goes past it.
func BenchmarkFsyncBaseline(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "fsync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := f.WriteAt(buf, 0); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "fsyncs/s")
}

// BenchmarkTaskWrites is the store's share of a local run's no-op task, the
// 1,000-task DAG's every task: its attempt started queued (the token taken
// before it waits for a slot) and finished with the process it ran
// (Outcome.Ran), one transaction each. It is the floor under the store's
// part of bench/run1k.sh.
func BenchmarkTaskWrites(b *testing.B) {
	s := openTest(b, filepath.Join(b.TempDir(), "state.db"), nil)
	run := newRun(b, s, "2024-01-01")
	ctx := context.Background()
	res := store.FenceResource("bench", "2024-01-01")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: fmt.Sprintf("t%d", i), Resource: res,
			Host: "h", Boot: "b", Lease: time.Minute, Queued: true})
		if err != nil {
			b.Fatal(err)
		}
		ran := &store.Running{Process: store.Process{Host: "h", Boot: "b", PID: 1000 + i, PGID: 1000 + i, Start: uint64(i)},
			Lease: time.Minute}
		if err := s.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptSucceeded, Ran: ran, Was: &a}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTaskWritesGrouped is BenchmarkTaskWrites from 8 goroutines at
// once, so that group commit puts several tasks' writes in one transaction:
// against BenchmarkTaskWrites' CPU per task, what a transaction costs.
func BenchmarkTaskWritesGrouped(b *testing.B) {
	s := openTest(b, filepath.Join(b.TempDir(), "state.db"), nil)
	run := newRun(b, s, "2024-01-01")
	ctx := context.Background()
	res := store.FenceResource("bench", "2024-01-01")
	var next atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(next.Add(1))
			a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: fmt.Sprintf("t%d", i), Resource: res,
				Host: "h", Boot: "b", Lease: time.Minute, Queued: true})
			if err != nil {
				b.Error(err)
				return
			}
			ran := &store.Running{Process: store.Process{Host: "h", Boot: "b", PID: 1000 + i, PGID: 1000 + i, Start: uint64(i)},
				Lease: time.Minute}
			if err := s.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptSucceeded, Ran: ran}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
