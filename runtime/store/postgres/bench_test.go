package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/internal/gendag"
	"github.com/pipec/pipec/internal/proctree"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/postgres"
	"github.com/pipec/pipec/spec"
	"github.com/pipec/pipec/spec/specload"
)

// BenchmarkQueueCycle is the store's part of what 3 one-slot workers do
// with the 1,000-task DAG of internal/gendag (seed 42), without their
// processes: each worker (a store handle of its own, as a worker process
// has) claims a task with its attempt (ClaimStarting), ends it succeeded as
// a short task's visit ends it (its process recorded with its end, the
// attempt as the claim left it), and claims the next in the same
// transaction (FinishClaiming), until the run ends. It reports the
// server's CPU (the postmaster and its backends) and this process's per
// task beside the wall time: the server's is what decides how many
// workers one PostgreSQL serves, and on a shared machine CPU is the
// steadier figure; and the log the server wrote per task, which does not
// vary with the load at all.
//
//	go test -run '^$' -bench QueueCycle -benchtime 5x ./runtime/store/postgres/
//	PIPEC_BENCH_TASKS=10000 go test …   the DAG of 10,000 tasks
func BenchmarkQueueCycle(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("PIPEC_BENCH_TASKS")); err == nil && v >= 2 {
		n = v // a bigger DAG, for a profile of the server that the schema's setup does not blur
	}
	queueCycle(b, gendagTasks(b, n))
}

// BenchmarkQueueCycleReady is BenchmarkQueueCycle over 3,000 tasks that
// need nothing: all ready at once, as the roots of a backfill's runs are.
// What a claim costs must not grow with the tasks ready.
func BenchmarkQueueCycleReady(b *testing.B) {
	tasks := make([]queue.Task, 3000)
	for i := range tasks {
		tasks[i].Name = fmt.Sprintf("t%04d", i)
	}
	queueCycle(b, tasks)
}

// queueCycle runs the tasks through 3 one-slot workers' claims and ends,
// b.N times, and reports the cost per task.
func queueCycle(b *testing.B, tasks []queue.Task) {
	srv := pg.Server(b)
	var wall, server, client time.Duration
	var wal int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// Cancelled at the end of the iteration: the workers' wakeups
		// hold a connection each until then.
		ctx, cancel := context.WithCancel(context.Background())
		url := srv.NewSchema(b)
		var stores []*postgres.Store
		for w := range 3 {
			s, err := postgres.Open(ctx, url, postgres.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			if err := s.Register(ctx, queue.WorkerInfo{Name: fmt.Sprintf("w%d", w+1), Host: "h", PID: 1, Slots: 1}, time.Minute); err != nil {
				b.Fatal(err)
			}
			stores = append(stores, s)
		}
		b.Cleanup(cancel) // before the stores close, should the iteration fail
		run, err := stores[0].Submit(ctx, queue.Submission{
			Run:  store.NewRun{Pipeline: "bench", Interval: "2024-01-01", CodeVersion: "1", PlanDigest: "sha256:plan"},
			Plan: []byte(`{}`), BaseDir: "/spec", Interval: "2024-01-01", Tasks: tasks,
		})
		if err != nil {
			b.Fatal(err)
		}
		wal0 := walLSN(b, stores[0])
		server0, client0 := proctree.CPU(srv.Pid()), selfCPU()
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, len(stores))
		for w, s := range stores {
			wg.Go(func() { errs <- cycle(ctx, s, fmt.Sprintf("w%d", w+1), run.ID) })
		}
		wg.Wait()
		wall += time.Since(start)
		b.StopTimer()
		server += proctree.CPU(srv.Pid()) - server0
		client += selfCPU() - client0
		wal += walLSN(b, stores[0]) - wal0
		close(errs)
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		if r, err := stores[0].GetRun(ctx, run.ID); err != nil || r.State != store.RunSucceeded {
			b.Fatalf("the run: %+v, %v; want succeeded", r, err)
		}
		cancel()
	}
	perTask := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N*len(tasks)) }
	b.ReportMetric(perTask(wall), "wall-µs/task")
	b.ReportMetric(perTask(server), "server-cpu-µs/task")
	b.ReportMetric(perTask(client), "client-cpu-µs/task")
	b.ReportMetric(float64(wal)/float64(b.N*len(tasks)), "wal-B/task")
}

// cycle is one worker's loop of BenchmarkQueueCycle: claim, end, claim
// again, until the run is over. As pipec worker does, it listens for
// wakeups only while it found nothing to claim, and then waits for one (or
// 10ms).
func cycle(ctx context.Context, s *postgres.Store, worker, run string) error {
	var wake <-chan struct{}
	stop := func() {}
	defer func() { stop() }()
	spec := store.AttemptSpec{Worker: worker, Host: "h", Boot: "boot"}
	cl, err := s.ClaimStarting(ctx, worker, time.Minute, spec)
	for err == nil {
		if cl == nil {
			r, rerr := s.GetRun(ctx, run)
			if rerr != nil || r.State != store.RunRunning {
				return rerr
			}
			if wake == nil {
				lctx, cancel := context.WithCancel(ctx)
				if wake, err = s.Wakeups(lctx); err != nil {
					cancel()
					return err
				}
				stop = cancel
			} else {
				select {
				case <-wake:
				case <-time.After(10 * time.Millisecond):
				}
			}
			cl, err = s.ClaimStarting(ctx, worker, time.Minute, spec)
			continue
		}
		if wake != nil {
			stop()
			wake, stop = nil, func() {}
		}
		if cl.Attempt == nil {
			return fmt.Errorf("%s claimed %s without its attempt", worker, cl.Task)
		}
		a := *cl.Attempt
		ran := &store.Running{Process: store.Process{PID: 4242, Host: "h", Boot: "boot"}}
		cl, err = s.FinishClaiming(ctx, worker, cl.Ref, queue.Result{Ending: queue.Succeeded, End: &queue.AttemptEnd{
			Ref: a.AttemptRef, Outcome: store.Outcome{State: store.AttemptSucceeded, Ran: ran, Was: &a}}}, time.Minute, spec)
	}
	return err
}

// gendagTasks are the tasks of the n-task benchmark DAG as a submission
// of its compiled plan has them.
func gendagTasks(b *testing.B, n int) []queue.Task {
	d, err := gendag.Generate(n, 42)
	if err != nil {
		b.Fatal(err)
	}
	p, ds := specload.Load(spec.SyntaxHCL, "pipeline.hcl", d.HCL())
	if ds.HasErrors() {
		b.Fatal(ds[0])
	}
	res, ds := compiler.Compile(p)
	if ds.HasErrors() {
		b.Fatal(ds[0])
	}
	return queue.PlanTasks(res.Plan)
}

// walLSN is the server's write-ahead log position, in bytes: what the
// writes between two reads cost in log, a figure that, unlike time, does
// not vary with the machine's load.
func walLSN(b *testing.B, s *postgres.Store) int64 {
	var lsn int64
	if err := s.Pool().QueryRow(context.Background(), `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&lsn); err != nil {
		b.Fatal(err)
	}
	return lsn
}

// selfCPU is this process's CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
