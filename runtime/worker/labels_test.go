package worker_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/proctest"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// steadyLease is the workers' lease in these tests: nothing here kills a
// worker, and on a loaded machine a 1s lease can lapse between heartbeats,
// which would make a live worker briefly not count as one.
const steadyLease = "5s"

// labelsSpec is a producer that only a worker offering "a" may run and its
// consumer, only for "b". Each writes the PIPEC_WORKER it ran under.
var labelsSpec = pairSpec("lab", []string{"a"}, []string{"b"})

var labelsFiles = map[string]string{
	"extract.sh": "#!/bin/sh\nprintf 'step,worker\\nextract,%s\\n' \"$PIPEC_WORKER\" > \"$PIPEC_OUTPUT_raw/data.csv\"\n",
	"clean.sh":   "#!/bin/sh\ncp \"$PIPEC_INPUT_raw/data.csv\" \"$PIPEC_OUTPUT_clean/data.csv\"\nprintf 'clean,%s\\n' \"$PIPEC_WORKER\" >> \"$PIPEC_OUTPUT_clean/data.csv\"\n",
}

// TestLabelsPinTasksToWorkers (on PostgreSQL and on one SQLite file): w1 offers a (and y), w2 offers b (and x,
// given comma-separated); each task runs on the worker with its label: the
// published data says so (PIPEC_WORKER, written by the tasks), and so do the
// run's claims and attempts. pipec workers lists the labels.
func TestLabelsPinTasksToWorkers(t *testing.T) { onBoth(t, testLabelsPinTasksToWorkers) }

func testLabelsPinTasksToWorkers(t *testing.T, b backend) {
	e := newEnvOn(t, b, labelsSpec, labelsFiles)
	e.worker("w1", "--label", "a", "--label", "y", "--lease", steadyLease)
	e.worker("w2", "--label", "x,b", "--lease", steadyLease)
	code, out := e.pipec("submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "20ms")
	if code != 0 {
		t.Fatalf("submit --wait: exit %d\n%s", code, out)
	}
	if strings.Contains(out, "pipec: note:") {
		t.Errorf("submit notes a label no live worker offers, though w1 and w2 offer them:\n%s", out)
	}
	data, err := os.ReadFile(filepath.Join(e.dir, "warehouse", "2024-01-01", "data.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "step,worker\nextract,w1\nclean,w2\n"; string(data) != want {
		t.Errorf("published data %q, want %q", data, want)
	}
	run := "lab/2024-01-01/r1"
	if s := e.starts(run, "extract"); !slices.Equal(s, []string{"w1"}) {
		t.Errorf("extract started on %v, want [w1]", s)
	}
	if s := e.starts(run, "clean"); !slices.Equal(s, []string{"w2"}) {
		t.Errorf("clean started on %v, want [w2]", s)
	}
	as, err := e.st.Attempts(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if want := map[string]string{"extract": "w1", "clean": "w2"}[a.Task]; a.Worker != want {
			t.Errorf("attempt %s#%d ran on %q, want %s", a.Task, a.Number, a.Worker, want)
		}
	}
	code, out = e.pipec("workers", "--state", e.url)
	if code != 0 || !strings.Contains(out, "w1  host") || !strings.Contains(out, "labels a,y") || !strings.Contains(out, "labels b,x") {
		t.Errorf("pipec workers: exit %d, want both workers with their labels sorted\n%s", code, out)
	}
}

// started is a pipec process other than a worker, running in the
// background.
func (e *env) started(args ...string) *proc {
	e.t.Helper()
	cmd := exec.Command(pipecBin, args...)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "PIPEC_STATE=")
	p := proctest.Start(e.t, args[0], cmd, 0)
	return p
}

// TestWaitingForLabels: a task requiring spark, and live workers none of
// which offers it: the run waits, visibly (status, a run.waiting event,
// submit --wait), naming the label; a worker offering spark that joins
// takes the task, and the run succeeds.
func TestWaitingForLabels(t *testing.T) { onBoth(t, testWaitingForLabels) }

func testWaitingForLabels(t *testing.T, b backend) {
	spec := pairSpec("lab", []string{"spark"}, nil)
	e := newEnvOn(t, b, spec, labelsFiles)
	e.worker("plain", "--lease", steadyLease)
	e.worker("gpu", "--label", "gpu", "--lease", steadyLease)
	wait := e.started("submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--wait", "--poll", "20ms")
	run := "lab/2024-01-01/r1"
	want := "task extract: waiting for a worker with labels spark (none is live)"
	for deadline := time.Now().Add(time.Minute); !strings.Contains(wait.Output(), "submitted "+run); time.Sleep(20 * time.Millisecond) {
		select {
		case <-wait.Done:
			t.Fatalf("submit --wait ended before submitting: %v\n%s", wait.Err, wait.Output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("submit did not submit:\n%s", wait.Output())
		}
	}
	rs := e.until(run, "waiting for a worker", func(rs queue.RunStatus) bool { return rs.Waiting != "" })
	if rs.Waiting != want || rs.Run.State != store.RunRunning {
		t.Fatalf("run %s waiting %q, want running and %q", rs.Run.State, rs.Waiting, want)
	}
	evs, err := e.st.Events(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	var waited []string
	for _, ev := range evs {
		if ev.Kind == queue.EventRunWaiting {
			var p struct{ Waiting string }
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			waited = append(waited, p.Waiting)
		}
	}
	if !slices.Equal(waited, []string{want}) {
		t.Errorf("run.waiting events %q, want one: %q", waited, want)
	}
	if s := e.starts(run, "extract"); len(s) != 0 {
		t.Fatalf("extract started on %v without spark", s)
	}
	if code, out := e.pipec("status", "--state", e.url); code != 0 || !strings.Contains(out, run+"  running\n  "+want+"\n") {
		t.Errorf("pipec status: exit %d, want the run waiting with %q\n%s", code, want, out)
	}

	e.worker("spark", "--label", "spark", "--lease", steadyLease)
	select {
	case <-wait.Done:
	case <-time.After(4 * time.Minute):
		t.Fatalf("submit --wait did not end:\n%s", wait.Output())
	}
	out := wait.Output()
	if wait.Err != nil {
		t.Fatalf("submit --wait: %v\n%s", wait.Err, out)
	}
	note := "pipec: note: task extract requires labels spark, which no live worker offers: the run waits for a worker started with --label spark"
	// (The claim itself may come and go between two of --wait's polls:
	// the run's events say who ran the task.)
	for _, line := range []string{note, want, "run " + run + " succeeded"} {
		if !strings.Contains(out, line) {
			t.Errorf("submit --wait output lacks %q:\n%s", line, out)
		}
	}
	if s := e.starts(run, "extract"); !slices.Equal(s, []string{"spark"}) {
		t.Errorf("extract started on %v, want [spark]", s)
	}
	if rs := e.until(run, "the end", finished); rs.Waiting != "" {
		t.Errorf("the finished run still waits: %q", rs.Waiting)
	}
}

// TestFailoverAmongLabelledWorkers: the seed's per_worker = 2, global = 4
// task, requiring gpu, on g1 and g2 (gpu) and n1 (none, started first, idle
// throughout): it alternates between g1 and g2 only, and once both are
// exhausted the run waits for a worker with gpu although n1, which never
// ran it, is live.
func TestFailoverAmongLabelledWorkers(t *testing.T) { onBoth(t, testFailoverAmongLabelledWorkers) }

func testFailoverAmongLabelledWorkers(t *testing.T, b backend) {
	spec := strings.Replace(failingSpec(1, 4), `retry   = "pipeline"`, `retry   = "pipeline"
    labels  = ["gpu"]`, 1)
	e := newEnvOn(t, b, spec, failFiles)
	n1 := e.worker("n1", "--lease", steadyLease)
	g1 := e.worker("g1", "--label", "gpu", "--lease", steadyLease)
	g2 := e.worker("g2", "--label", "gpu,ssd", "--lease", steadyLease)
	run := e.submit("2024-01-01")
	want := "task extract: waiting for a worker with labels gpu: global count 3 of 4"
	e.until(run, "waiting for a worker", func(rs queue.RunStatus) bool { return rs.Waiting == want })
	starts := e.starts(run, "extract")
	alternating(t, starts, 4)
	for _, w := range starts {
		if w != "g1" && w != "g2" {
			t.Fatalf("starts %v: one on a worker without gpu", starts)
		}
	}
	as, err := e.st.Attempts(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if a.Worker == "n1" {
			t.Fatalf("attempt %d ran on n1, which offers no gpu", a.Number)
		}
	}
	for _, p := range []*proc{n1, g1, g2} {
		p.Signal(t, syscall.SIGTERM)
	}
	if strings.Contains(n1.Output(), "start ") {
		t.Errorf("n1 started something:\n%s", n1.Output())
	}
}

// TestLabelledTaskHandedBack: the only worker offering spark is stopped
// with SIGTERM while it runs the task: the task is handed back (counted
// nowhere), the idle worker without spark does not take it, the run waits
// for a worker with spark, and one that joins runs it to the end.
func TestLabelledTaskHandedBack(t *testing.T) { onBoth(t, testLabelledTaskHandedBack) }

func testLabelledTaskHandedBack(t *testing.T, b backend) {
	spec := pairSpec("lab", []string{"spark"}, nil)
	files := map[string]string{
		// On s1 the task runs until stopped; on s2 it finishes.
		"extract.sh": "#!/bin/sh\nif [ \"$PIPEC_WORKER\" = s1 ]; then touch \"$PIPEC_WORKER.started\"; exec sleep 120; fi\n" +
			"printf 'step,worker\\nextract,%s\\n' \"$PIPEC_WORKER\" > \"$PIPEC_OUTPUT_raw/data.csv\"\n",
		"clean.sh": labelsFiles["clean.sh"],
	}
	e := newEnvOn(t, b, spec, files)
	e.worker("plain", "--lease", steadyLease)
	s1 := e.worker("s1", "--label", "spark", "--lease", steadyLease)
	run := e.submit("2024-01-01")
	e.until(run, "extract running on s1", func(queue.RunStatus) bool {
		_, err := os.Stat(filepath.Join(e.dir, "s1.started"))
		return err == nil
	})
	s1.Signal(t, syscall.SIGTERM)
	want := "task extract: waiting for a worker with labels spark (none is live)"
	rs := e.until(run, "waiting for spark", func(rs queue.RunStatus) bool { return rs.Waiting == want })
	for _, ts := range rs.Tasks {
		if ts.Task == "extract" && (ts.State != queue.WorkReady || ts.Failover.Failovers != 0 || ts.Failover.Starts != 0) {
			t.Fatalf("extract after the SIGTERM: %+v, want ready with nothing counted", ts)
		}
	}
	e.worker("s2", "--label", "spark", "--lease", steadyLease)
	rs = e.until(run, "the end", finished)
	if rs.Run.State != store.RunSucceeded {
		t.Fatalf("run %s, want succeeded", rs.Run.State)
	}
	if s := e.starts(run, "extract"); !slices.Equal(s, []string{"s1", "s2"}) {
		t.Errorf("extract started on %v, want [s1 s2]", s)
	}
	data, err := os.ReadFile(filepath.Join(e.dir, "warehouse", "2024-01-01", "data.csv"))
	if err != nil || !strings.Contains(string(data), "extract,s2\n") {
		t.Errorf("published data %q (%v), want extract's from s2", data, err)
	}
}
