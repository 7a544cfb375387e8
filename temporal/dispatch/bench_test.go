package dispatch_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"

	"github.com/pipec/pipec/internal/pgtest"
)

// BenchmarkWorkers1k runs the shared benchmark's 1,000-task DAG three ways,
// side by side in each iteration: 3 pipec-temporal workers (one slot each)
// on Temporal (the in-process test server) with the state on PostgreSQL;
// 3 pipec worker processes on pipec's own PostgreSQL queue; and a local
// pipec run --parallel 3 on SQLite. It reports each wall, attempts per
// second, Temporal's wall over the queue's, and what Temporal's history
// holds per task.
//
// The spec is PIPEC_BENCH_SPEC (the generator's pipeline.hcl: -n 1000
// -seed 42); without it the benchmark skips.
//
//	PIPEC_BENCH_SPEC=/tmp/dag1k/pipeline.hcl go test -run '^$' -bench Workers1k -benchtime 1x ./dispatch/
func BenchmarkWorkers1k(b *testing.B) {
	path := os.Getenv("PIPEC_BENCH_SPEC")
	if path == "" {
		b.Skip("set PIPEC_BENCH_SPEC to the 1,000-task DAG's pipeline.hcl")
	}
	spec, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	pg := pgtest.Start(b)
	var local, queued, temporal, serverCPU, queueWorkersCPU, temporalWorkersCPU time.Duration
	var events, tasks int
	kinds := map[string]int{}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// Local run on SQLite.
		ldir := b.TempDir()
		if err := os.WriteFile(filepath.Join(ldir, "pipeline.hcl"), spec, 0o644); err != nil {
			b.Fatal(err)
		}
		run := exec.Command(pipecBin, "run", "pipeline.hcl", "--interval", "2024-01-01", "--parallel", "3")
		run.Dir = ldir
		run.Env = append(os.Environ(), "PIPEC_STATE=")
		start := time.Now()
		if out, err := run.CombinedOutput(); err != nil {
			b.Fatalf("local run: %v\n%s", err, out)
		}
		local += time.Since(start)

		// 3 pipec workers on pipec's PostgreSQL queue.
		qdir := b.TempDir()
		if err := os.WriteFile(filepath.Join(qdir, "pipeline.hcl"), spec, 0o644); err != nil {
			b.Fatal(err)
		}
		qurl := pg.NewSchema(b)
		qarts := filepath.Join(qdir, "artifacts")
		if err := os.Mkdir(qarts, 0o755); err != nil {
			b.Fatal(err)
		}
		var qpids []int
		for _, name := range []string{"q1", "q2", "q3"} {
			qpids = append(qpids, startProc(b, qdir, pipecBin, "worker", "--state", qurl, "--name", name, "--workdir", filepath.Join(qdir, "work-"+name),
				"--lease", "10s", "--artifacts", qarts))
		}
		time.Sleep(time.Second) // registered
		sub := exec.Command(pipecBin, "submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", qurl, "--wait", "--poll", "100ms")
		sub.Dir = qdir
		sub.Env = append(os.Environ(), "PIPEC_STATE=")
		qcpu := procsCPU(qpids)
		start = time.Now()
		if out, err := sub.CombinedOutput(); err != nil {
			b.Fatalf("pipec submit --wait: %v\n%s", err, out)
		}
		queued += time.Since(start)
		queueWorkersCPU += procsCPU(qpids) - qcpu

		// 3 workers on Temporal, the state on PostgreSQL.
		e := newEnvAt(b, string(spec), nil, pg.NewSchema(b))
		var tpids []int
		for _, name := range []string{"w1", "w2", "w3"} {
			tpids = append(tpids, e.worker(name).Cmd.Process.Pid)
		}
		tcpu := procsCPU(tpids)
		b.StartTimer()
		cpu0 := selfCPU()
		start = time.Now()
		code, _, out := e.submit("2024-01-01", true)
		temporal += time.Since(start)
		serverCPU += selfCPU() - cpu0
		temporalWorkersCPU += procsCPU(tpids) - tcpu
		b.StopTimer()
		if code != 0 {
			b.Fatalf("pipec-temporal submit --wait: exit %d\n%s", code, out)
		}
		it := e.c.GetWorkflowHistory(context.Background(), e.wid("bench", "2024-01-01"), "", false,
			enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				b.Fatal(err)
			}
			events++
			kinds[ev.GetEventType().String()]++
			if ev.GetEventType() == enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED {
				b.Logf("workflow input: %d bytes", len(ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0].GetData()))
			}
		}
		tasks += 1000
	}
	n := float64(b.N)
	var ks []string
	for k, v := range kinds {
		ks = append(ks, fmt.Sprintf("%s %.2f", strings.TrimPrefix(k, "EVENT_TYPE_"), float64(v)/float64(tasks)))
	}
	b.Logf("history events per task: %.2f (%s)", float64(events)/float64(tasks), strings.Join(ks, ", "))
	b.ReportMetric(local.Seconds()/n, "local-s/op")
	b.ReportMetric(queued.Seconds()/n, "pgqueue-s/op")
	b.ReportMetric(temporal.Seconds()/n, "temporal-s/op")
	b.ReportMetric(temporal.Seconds()/queued.Seconds(), "temporal/pgqueue")
	b.ReportMetric(1000*n/local.Seconds(), "local-attempts/s")
	b.ReportMetric(1000*n/queued.Seconds(), "pgqueue-attempts/s")
	b.ReportMetric(1000*n/temporal.Seconds(), "temporal-attempts/s")
	b.ReportMetric(float64(events)/float64(tasks), "history-events/task")
	// The Temporal server runs in this process: its CPU while the run ran.
	b.ReportMetric(serverCPU.Seconds()/n, "temporal-server-cpu-s/op")
	// The worker processes' CPU while the run ran (user and system).
	b.ReportMetric(queueWorkersCPU.Seconds()/n, "pgqueue-workers-cpu-s/op")
	b.ReportMetric(temporalWorkersCPU.Seconds()/n, "temporal-workers-cpu-s/op")
}

// procsCPU is the CPU time (user and system) of the processes so far, as
// /proc says (0 where it cannot be read: not Linux).
func procsCPU(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: state is the
		// first, utime the 12th and stime the 13th (clock ticks).
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 13 {
			continue
		}
		var ut, st int64
		fmt.Sscan(f[11], &ut)
		fmt.Sscan(f[12], &st)
		total += time.Duration(ut+st) * time.Second / 100
	}
	return total
}

// startProc starts a process for the benchmark's lifetime and returns
// its pid.
func startProc(b *testing.B, dir, bin string, args ...string) int {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PIPEC_STATE=")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// selfCPU is this process's CPU time (user and system) so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
