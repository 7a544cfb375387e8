package worker_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/gendag"
	"github.com/pipec/pipec/internal/proctree"
)

// BenchmarkWorkers1k runs the 1,000-task DAG of internal/gendag
// through 3 pipec worker processes on PostgreSQL (one slot each) and, side
// by side in each iteration, a local pipec run of the same DAG on SQLite
// with --parallel 3. It reports both walls, their ratio (the goal is at
// most 2×) and attempts per second on each store.
//
//	go test -run '^$' -bench Workers1k -benchtime 3x ./runtime/worker/
func BenchmarkWorkers1k(b *testing.B) {
	workersBesideLocal(b, dag1k(b), dag1kTasks, oneRun())
}

// BenchmarkWorkersBackfill is a backfill through the workers: 100 daily
// intervals of the 20-task DAG of internal/gendag (seed 42, its last
// task's output published every interval), one run at a time, handed to 3
// one-slot workers on PostgreSQL by pipec backfill --submit --wait, beside
// the same pipec backfill run locally with --parallel 3 on SQLite. Each
// interval is handed over as the last one ends, so how soon the backfill
// sees a run's end counts beside the tasks.
//
//	go test -run '^$' -bench WorkersBackfill -benchtime 2x ./runtime/worker/
func BenchmarkWorkersBackfill(b *testing.B) {
	const tasks, intervals = 20, 100
	d, err := gendag.Generate(tasks, 42)
	if err != nil {
		b.Fatal(err)
	}
	last := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, intervals-1).Format(time.DateOnly)
	args := []string{"backfill", "pipeline.hcl", "--from", "2024-01-01", "--to", last}
	workersBesideLocal(b, d.HCL(), tasks*intervals, benchJob{
		local:  append(slices.Clone(args), "--parallel", "3"),
		submit: append(slices.Clone(args), "--submit", "--wait", "--poll", "100ms"),
	})
}

// benchJob is what a worker benchmark measures: the local command, and
// the one handing the same work to the workers and following it (the
// state is added to both).
type benchJob struct{ local, submit []string }

// oneRun is one interval: pipec run, and pipec submit --wait.
func oneRun() benchJob {
	return benchJob{
		local:  []string{"run", "pipeline.hcl", "--interval", "2024-01-01", "--parallel", "3"},
		submit: []string{"submit", "pipeline.hcl", "--interval", "2024-01-01", "--wait", "--poll", "100ms"},
	}
}

// BenchmarkWorkersReady is BenchmarkWorkers1k with 3,000 tasks that need
// nothing, all ready from the start, as the first tasks of a backfill's
// runs are: what a claim costs must not grow with the tasks ready.
//
//	go test -run '^$' -bench WorkersReady -benchtime 2x ./runtime/worker/
func BenchmarkWorkersReady(b *testing.B) {
	var spec strings.Builder
	spec.WriteString("pipeline \"bench\" {\n  code_version = \"1\"\n  schedule {\n    every = \"24h\"\n    start = \"2024-01-01T00:00:00Z\"\n  }\n")
	for i := range 3000 {
		fmt.Fprintf(&spec, "  task \"t%04d\" {\n    command = [\"true\"]\n    timeout = \"1m\"\n  }\n", i)
	}
	spec.WriteString("}\n")
	workersBesideLocal(b, []byte(spec.String()), 3000, oneRun())
}

// workersBesideLocal runs job on spec (of tasks attempts) through 3 pipec
// worker processes on PostgreSQL and, side by side in each iteration,
// locally on SQLite, and reports both.
func workersBesideLocal(b *testing.B, spec []byte, tasks int, job benchJob) {
	// PIPEC_BENCH_SLOTS sets each worker's --slots (1 by default: three
	// tasks at once, as the local run's --parallel 3).
	slots := os.Getenv("PIPEC_BENCH_SLOTS")
	if slots == "" {
		slots = "1"
	}
	// PIPEC_BENCH_PROFILE=DIR runs the workers from a test build of pipec
	// that writes a CPU profile each (DIR/wN-i.pprof; go tool pprof -top
	// DIR/w*.pprof merges them), and the submit too (DIR/submit-i.pprof).
	profDir := os.Getenv("PIPEC_BENCH_PROFILE")
	// PIPEC_BENCH_RTT=1ms has the workers and the submit talk to the server
	// through a loopback proxy that delays each direction by half of it
	// (pgtest.Server.Delayed), as clients on other machines would; the
	// server's own answers over its socket take microseconds. The proxy
	// adds some 0.1 ms of its own (go test -bench RoundTrip
	// ./internal/netdelay/).
	var rtt time.Duration
	if v := os.Getenv("PIPEC_BENCH_RTT"); v != "" {
		var err error
		if rtt, err = time.ParseDuration(v); err != nil || rtt < 0 {
			b.Fatalf("PIPEC_BENCH_RTT=%s: not a duration", v)
		}
	}
	var pairs walls
	cpu := benchCPU{job: job}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		local := cpu.localRun(b, spec)

		// The same work through 3 workers on PostgreSQL.
		e := newEnv(b, string(spec), nil)
		if rtt > 0 {
			e.url = pg.Server(b).Delayed(b, e.url, rtt/2)
		}
		var ws []*proc
		for _, name := range []string{"w1", "w2", "w3"} {
			if profDir != "" {
				prof := filepath.Join(profDir, fmt.Sprintf("%s-%d.pprof", name, i))
				ws = append(ws, e.workerWith(hookPipec(b), []string{"PIPEC_TEST_CPUPROFILE=" + prof}, name, "--slots", slots))
				continue
			}
			ws = append(ws, e.worker(name, "--slots", slots))
		}
		before, _ := pg.Server(b).Psql(b.Context(), "", "SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'")
		b.StartTimer()
		start := time.Now()
		if profDir != "" {
			cpu.profile = filepath.Join(profDir, fmt.Sprintf("submit-%d.pprof", i))
		}
		code, out := cpu.follow(b, e, ws, proctree.Child(os.Getpid(), "postgres"))
		pairs.add(local, time.Since(start))
		b.StopTimer()
		after, _ := pg.Server(b).Psql(b.Context(), "", "SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'")
		b.Logf("commits: %s -> %s", strings.TrimSpace(before), strings.TrimSpace(after))
		if dir := os.Getenv("PIPEC_BENCH_STATEMENTS"); dir != "" {
			// The statements the run cost the server, most time first, in
			// DIR/statements-N.txt: PIPEC_PG_OPTIONS=shared_preload_libraries=pg_stat_statements
			// loads the extension (plan_ms needs pg_stat_statements.track_planning=on too).
			top, err := pg.Server(b).Psql(b.Context(), "", `CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
SELECT calls, round(total_exec_time::numeric, 1) AS ms, round(total_plan_time::numeric, 1) AS plan_ms, rows,
	left(regexp_replace(query, '\s+', ' ', 'g'), 160)
FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 40; SELECT pg_stat_statements_reset();`)
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("statements-%d.txt", i)), []byte(top), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		if code != 0 {
			b.Fatalf("submit --wait: exit %d\n%s", code, out)
		}
		// Stopped, so the next iteration's workers have the machine (and
		// a profile is written as its worker exits).
		for _, w := range ws {
			w.Signal(b, syscall.SIGTERM)
		}
	}
	reportBeside(b, tasks, pairs, &cpu)
}

// localRun runs the benchmark's job locally on SQLite (pipec run
// --parallel 3 of the DAG), the reference the workers are measured beside,
// in each iteration, and returns its wall time (its CPU goes to c.local).
func (c *benchCPU) localRun(b *testing.B, spec []byte) time.Duration {
	b.Helper()
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pipeline.hcl"), spec, 0o644); err != nil {
		b.Fatal(err)
	}
	run := exec.Command(pipecBin, c.job.local...)
	run.Dir = dir
	run.Env = append(os.Environ(), "PIPEC_STATE=")
	start := time.Now()
	if out, err := run.CombinedOutput(); err != nil {
		b.Fatalf("local run: %v\n%s", err, out)
	}
	wall := time.Since(start)
	c.local += run.ProcessState.UserTime() + run.ProcessState.SystemTime()
	return wall
}

// walls are a benchmark's wall times, iteration by iteration: the local
// run's and the workers' beside it.
type walls struct{ local, workers []time.Duration }

func (w *walls) add(local, workers time.Duration) {
	w.local, w.workers = append(w.local, local), append(w.workers, workers)
}

// reportBeside reports the workers' wall beside the local run's and their
// ratio (the goal is at most 2×): over all iterations, and the median and
// range of each iteration's, as bench/run1k.sh reports its pairs (one
// reading moves with the machine's load, and one disturbed iteration does
// not move a median); attempts per second on each, and the CPU.
func reportBeside(b *testing.B, tasks int, w walls, cpu *benchCPU) {
	n := float64(b.N)
	var local, workers time.Duration
	ratios := make([]float64, len(w.local))
	for i := range w.local {
		local, workers = local+w.local[i], workers+w.workers[i]
		ratios[i] = w.workers[i].Seconds() / w.local[i].Seconds()
	}
	slices.Sort(ratios)
	b.ReportMetric(local.Seconds()/n, "local-s/op")
	b.ReportMetric(workers.Seconds()/n, "workers-s/op")
	b.ReportMetric(workers.Seconds()/local.Seconds(), "ratio")
	if len(ratios) > 0 {
		median := ratios[len(ratios)/2]
		if len(ratios)%2 == 0 {
			median = (ratios[len(ratios)/2-1] + median) / 2
		}
		b.ReportMetric(median, "ratio-median")
		b.ReportMetric(ratios[0], "ratio-min")
		b.ReportMetric(ratios[len(ratios)-1], "ratio-max")
	}
	b.ReportMetric(float64(tasks)*n/local.Seconds(), "local-attempts/s")
	b.ReportMetric(float64(tasks)*n/workers.Seconds(), "workers-attempts/s")
	b.ReportMetric(cpu.local.Seconds()/n, "local-cpu-s/op")
	cpu.report(b)
}

// benchCPU sums the CPU time of a benchmark's processes.
type benchCPU struct {
	// job is the work measured.
	job                            benchJob
	local, workers, server, submit time.Duration
	// workersOwn is the part of workers that is the worker processes' own,
	// not their tasks'.
	workersOwn time.Duration
	// harness is the benchmark's own process meanwhile: with
	// PIPEC_BENCH_RTT the proxy, which shares the cores with the rest.
	harness time.Duration
	// profile, when set, is where follow's submit (a test build of pipec)
	// writes its CPU profile.
	profile string
}

// The benchmarks report CPU beside wall time: on a shared machine CPU is
// the steadier measure, and it says which process the time went to (the
// workers and their tasks, the database server, pipec submit --wait).

// follow hands the job to the workers and follows it (pipec submit --wait
// of the benchmark DAG), adding the CPU time
// the workers (with their tasks), the database server (server: its
// postmaster, 0 for none) and the submit took meanwhile.
func (c *benchCPU) follow(b *testing.B, e *env, ws []*proc, server int) (int, string) {
	b.Helper()
	cpu := func() (w, own, s time.Duration) {
		for _, p := range ws {
			w += proctree.CPU(p.Cmd.Process.Pid)
			own += proctree.Own(p.Cmd.Process.Pid)
		}
		if server != 0 {
			s = proctree.CPU(server)
		}
		return w, own, s
	}
	w0, own0, s0 := cpu()
	h0 := proctree.Own(os.Getpid())
	bin, env := pipecBin, append(os.Environ(), "PIPEC_STATE=")
	if c.profile != "" {
		bin, env = hookPipec(b), append(env, "PIPEC_TEST_CPUPROFILE="+c.profile)
	}
	cmd := exec.Command(bin, append(slices.Clone(c.job.submit), "--state", e.url)...)
	cmd.Dir = e.dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	w1, own1, s1 := cpu()
	c.harness += proctree.Own(os.Getpid()) - h0
	c.workers += w1 - w0
	c.workersOwn += own1 - own0
	c.server += s1 - s0
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		b.Fatal(err)
	}
	c.submit += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return code, string(out)
}

// report reports the CPU seconds per run of the workers, the server and
// the submit, and their sum.
func (c *benchCPU) report(b *testing.B) {
	n := float64(b.N)
	b.ReportMetric(c.workers.Seconds()/n, "workers-cpu-s/op")
	b.ReportMetric(c.workersOwn.Seconds()/n, "workers-own-cpu-s/op")
	if c.server > 0 {
		b.ReportMetric(c.server.Seconds()/n, "server-cpu-s/op")
	}
	b.ReportMetric(c.submit.Seconds()/n, "submit-cpu-s/op")
	b.ReportMetric((c.workers+c.server+c.submit).Seconds()/n, "all-cpu-s/op")
	b.ReportMetric(c.harness.Seconds()/n, "harness-cpu-s/op")
}
