package dispatch_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/store"
)

// pipec submit --due and pipec backfill --submit on Temporal: pipec's own
// commands (the same decisions, flags and lines as on the state's queue;
// runtime/worker/due_test.go holds the queue's side) with each interval
// one workflow pipec/<pipeline>/<interval>@<state>. They run through pipec itself,
// which hands them to pipec-temporal (--engine, or PIPEC_ENGINE).

// pipecEnv runs pipec with more environment (PIPEC_ENGINE), to its end.
func (e *env) pipecEnv(environ []string, args ...string) (int, string) {
	e.t.Helper()
	cmd := exec.Command(pipecBin, args...)
	cmd.Dir = e.dir
	cmd.Env = append(append(os.Environ(), "PIPEC_STATE=", "PIPEC_ENGINE="), environ...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return code, string(out)
}

// runsOf lists the state's runs of one interval.
func (e *env) runsOf(pipeline, interval string) []store.Run {
	e.t.Helper()
	rs, err := e.st.ListRuns(context.Background(), store.RunFilter{Pipeline: pipeline, Interval: interval})
	if err != nil {
		e.t.Fatal(err)
	}
	return rs
}

// workflowOf is the interval's workflow's last run as Temporal describes
// it: its status ("" when there is none).
func (e *env) workflowOf(pipeline, interval string) string {
	e.t.Helper()
	d, err := e.c.DescribeWorkflowExecution(context.Background(), e.wid(pipeline, interval), "")
	if err != nil {
		return ""
	}
	return d.GetWorkflowExecutionInfo().GetStatus().String()
}

// TestSubmitDueTemporal: pipec submit --due --engine hands the missed
// intervals to two pipec workers on Temporal, never more than
// max_active_runs at once though the workers have 4 slots between them,
// each interval one workflow; a second --due finds nothing due; --dry-run
// hands nothing over; without --wait (and the engine from PIPEC_ENGINE)
// it returns once the last is handed over, and the next --due reports the
// interval still open instead of submitting it again.
func TestSubmitDueTemporal(t *testing.T) {
	e := newEnv(t, scenario.Due, scenario.DueFiles())
	e.worker("w1", "--slots", "2")
	e.worker("w2", "--slots", "2")
	code, out := e.run(pipecBin, "submit", "pipeline.hcl", "--due", "--now", "2024-01-06T00:00:00Z", "--state", e.url,
		"--engine", e.engine, "--wait", "--poll", "20ms")
	if code != 0 {
		t.Fatalf("submit --due --wait: exit %d\n%s", code, out)
	}
	for _, want := range []string{
		"due due at 2024-01-06T00:00:00Z: latest due interval 2024-01-05 (catchup = true: 5 due interval(s) from 2024-01-01)\n",
		"  to run:       5 interval(s), 2 at a time (schedule max_active_runs)\n",
		"interval 1 of 5 (2024-01-01), 0 succeeded, 0 failed\n",
		"2024-01-01  submitted due/2024-01-01/r1 (1 tasks)\n",
		"2024-01-05  due/2024-01-05/r1 succeeded\n",
		"due: 5 of 5 run(s) succeeded\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if runs, top, err := scenario.MostAtOnce(filepath.Join(e.dir, "times.log")); err != nil || runs != 5 || top > 2 {
		t.Errorf("%d runs, %d at once (%v); want 5, at most 2 (max_active_runs)", runs, top, err)
	}
	for _, iv := range []string{"2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"} {
		if w := e.starts("due/"+iv+"/r1", "record"); len(w) != 1 || (w[0] != "w1" && w[0] != "w2") {
			t.Errorf("starts of %s: %v", iv, w)
		}
		if s := e.workflowOf("due", iv); s != "Completed" {
			t.Errorf("workflow of %s: %q, want Completed", iv, s)
		}
	}
	code, out = e.run(pipecBin, "submit", "pipeline.hcl", "--due", "--now", "2024-01-06T00:00:00Z", "--state", e.url, "--engine", e.engine)
	if code != 0 || !strings.Contains(out, "  skip 2024-01-01 to 2024-01-05 (5): succeeded\nnothing due\n") {
		t.Fatalf("second submit --due: exit %d\n%s", code, out)
	}

	// A dry run says what it would hand over and hands over nothing: the
	// lines of the queue's dry run, no run, no workflow.
	code, out = e.run(pipecBin, "submit", "pipeline.hcl", "--due", "--now", "2024-01-09T00:00:00Z", "--state", e.url,
		"--engine", e.engine, "--dry-run")
	if want := "dry run: would hand to the workers 3 interval(s), 2 at once: 2024-01-06, 2024-01-07, 2024-01-08; " +
		"nothing launched, the state is unchanged\n"; code != 0 || !strings.Contains(out, want) {
		t.Fatalf("submit --due --dry-run: exit %d, want %q\n%s", code, want, out)
	}
	_, queueOut := e.run(pipecBin, "submit", "pipeline.hcl", "--due", "--now", "2024-01-09T00:00:00Z", "--state", e.url, "--dry-run")
	if queueOut != out {
		t.Errorf("the dry run on Temporal says\n%s\nand on the queue\n%s", out, queueOut)
	}
	if rs := e.runsOf("due", "2024-01-06"); len(rs) != 0 || e.workflowOf("due", "2024-01-06") != "" {
		t.Fatalf("the dry run made runs %v or a workflow", rs)
	}

	// Without --wait, the engine from PIPEC_ENGINE: three more are due; it
	// hands over two, the third as soon as one of them ends, and returns.
	code, out = e.pipecEnv([]string{"PIPEC_ENGINE=" + e.engine}, "submit", "pipeline.hcl", "--due", "--now", "2024-01-09T00:00:00Z",
		"--state", e.url, "--poll", "20ms")
	if code != 0 || !strings.Contains(out, "2024-01-08  submitted due/2024-01-08/r1") || !strings.Contains(out, "running on the workers") {
		t.Fatalf("submit --due (PIPEC_ENGINE): exit %d\n%s", code, out)
	}
	if s := e.workflowOf("due", "2024-01-08"); s != "Running" {
		t.Fatalf("workflow of 2024-01-08: %q, want Running", s)
	}
	// 2024-01-08 is still open (it waits for release): the next --due
	// names it, in progress, and hands it over no second time.
	code, out = e.run(pipecBin, "submit", "pipeline.hcl", "--due", "--now", "2024-01-09T00:00:00Z", "--state", e.url, "--engine", e.engine)
	if code != 0 || !strings.Contains(out, "  active 2024-01-08: a run of it is active: due/2024-01-08/r1 (") ||
		!strings.Contains(out, "\nnothing due\n") {
		t.Fatalf("submit --due beside an open workflow: exit %d\n%s", code, out)
	}
	if rs := e.runsOf("due", "2024-01-08"); len(rs) != 1 {
		t.Fatalf("2024-01-08 has runs %v, want one", rs)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, iv := range []string{"2024-01-06", "2024-01-07", "2024-01-08"} {
		if r := e.until("due/" + iv + "/r1"); r.State != store.RunSucceeded {
			t.Errorf("%s: %s", iv, r.State)
		}
	}
	if runs, top, err := scenario.MostAtOnce(filepath.Join(e.dir, "times.log")); err != nil || runs != 8 || top > 2 {
		t.Errorf("%d runs, %d at once (%v); want 8, at most 2", runs, top, err)
	}
}

// An interval whose workflow is open though the state holds no run of it
// in progress (here the run was cancelled in the state alone, as pipec
// cancel without --engine does; a lapsed lease reads the same) is not
// handed over twice: Temporal refuses a second workflow of the interval,
// and --due reports the interval left to the run in progress, exit 0, as
// the queue reports an interval another run holds.
func TestSubmitDueOpenWorkflow(t *testing.T) {
	e := newEnv(t, scenario.Due, scenario.DueFiles())
	// No worker: the workflow stays open.
	if code, out := e.run(pipecBin, "submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--engine", e.engine); code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	if _, err := e.st.CancelRun(context.Background(), "due/2024-01-01/r1", "the state's side only", "test"); err != nil {
		t.Fatal(err)
	}
	code, out := e.run(pipecBin, "submit", "pipeline.hcl", "--due", "--now", "2024-01-02T00:00:00Z", "--state", e.url, "--engine", e.engine)
	for _, want := range []string{
		"2024-01-01  skipped: interval 2024-01-01 of pipeline due is being run by " + e.wid("due", "2024-01-01") + " (submitted to the workers)\n",
		"due: 0 of 1 run(s) succeeded; 1 left to the run in progress\n",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("submit --due beside an open workflow: exit %d, want %q\n%s", code, want, out)
		}
	}
	if rs := e.runsOf("due", "2024-01-01"); len(rs) != 1 {
		t.Fatalf("2024-01-01 has runs %v, want the one", rs)
	}
}

// TestBackfillSubmitTemporal: pipec backfill --submit --engine --wait hands
// examples/backfill's intervals to two workers on Temporal one after the
// other (totals reads the day before); after a code_version change,
// --stale --submit rebuilds exactly the published intervals; a dry run
// with an interval blocked exits 1 and hands nothing over, as on the
// queue.
func TestBackfillSubmitTemporal(t *testing.T) {
	files := map[string]string{}
	for _, name := range []string{"events.sh", "totals.sh"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", "backfill", name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
	}
	spec, err := os.ReadFile(filepath.Join("..", "..", "examples", "backfill", "pipeline.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, string(spec), files)
	e.worker("w1")
	e.worker("w2")
	code, out := e.run(pipecBin, "backfill", "pipeline.hcl", "--from", "2024-01-01", "--to", "2024-01-03", "--submit", "--wait",
		"--state", e.url, "--engine", e.engine, "--poll", "20ms")
	if code != 0 {
		t.Fatalf("backfill --submit --wait: exit %d\n%s", code, out)
	}
	for _, want := range []string{
		"interval 1 of 3 (2024-01-01), 0 succeeded, 0 failed\n2024-01-01  submitted daily_totals/2024-01-01/r1 (2 tasks)\n",
		"2024-01-01  daily_totals/2024-01-01/r1 succeeded\ninterval 2 of 3 (2024-01-02), 1 succeeded, 0 failed, ETA ",
		"backfill: 3 of 3 run(s) succeeded\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, iv := range []string{"2024-01-01", "2024-01-02", "2024-01-03"} {
		if w := e.starts("daily_totals/"+iv+"/r1", "totals"); len(w) != 1 {
			t.Errorf("totals of %s started on %v", iv, w)
		}
		if _, err := os.Stat(filepath.Join(e.dir, "marts", "daily_totals", iv, "running_totals.csv")); err != nil {
			t.Error(err)
		}
		if s := e.workflowOf("daily_totals", iv); s != "Completed" {
			t.Errorf("workflow of %s: %q, want Completed", iv, s)
		}
	}
	// A dry run over an interval whose input (the day before) has no
	// accepted version: blocked, exit 1, nothing handed over.
	code, out = e.run(pipecBin, "backfill", "pipeline.hcl", "--from", "2024-01-05", "--to", "2024-01-06", "--submit", "--dry-run",
		"--state", e.url, "--engine", e.engine)
	if code != 1 || !strings.Contains(out, "  blocked 2024-01-05: ") {
		t.Fatalf("backfill --dry-run with a blocked interval: exit %d, want 1\n%s", code, out)
	}
	if rs := e.runsOf("daily_totals", "2024-01-05"); len(rs) != 0 {
		t.Fatalf("the dry run made runs %v", rs)
	}
	// The logic fix.
	b, _ := os.ReadFile(filepath.Join(e.dir, "pipeline.hcl"))
	if err := os.WriteFile(filepath.Join(e.dir, "pipeline.hcl"), []byte(strings.ReplaceAll(string(b), "2024.06.1", "2024.07.1")), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = e.pipecEnv([]string{"PIPEC_ENGINE=" + e.engine}, "backfill", "pipeline.hcl", "--from", "2024-01-01", "--to", "2024-01-04",
		"--stale", "--submit", "--wait", "--state", e.url, "--poll", "20ms")
	if code != 0 || !strings.Contains(out, "  skip 2024-01-04: not stale: not published\n") || !strings.Contains(out, "backfill: 3 of 3 run(s) succeeded; 1 skipped\n") {
		t.Fatalf("backfill --stale --submit --wait: exit %d\n%s", code, out)
	}
	lineage, err := os.ReadFile(filepath.Join(e.dir, "marts", "daily_totals", "2024-01-03", "_pipec.json"))
	if err != nil || !strings.Contains(string(lineage), `"code_version": "2024.07.1"`) || !strings.Contains(string(lineage), "daily_totals/2024-01-03/r2") {
		t.Fatalf("lineage after the rebuild: %v\n%s", err, lineage)
	}
	// --engine runs nothing here: without --submit it is a usage error.
	if code, out := e.run(pipecBin, "backfill", "pipeline.hcl", "--from", "2024-01-01", "--to", "2024-01-01", "--engine", e.engine, "--state", e.url); code != 2 {
		t.Fatalf("backfill --engine without --submit: exit %d, want 2\n%s", code, out)
	}
}

// A run that fails makes submit --due --wait exit 1, naming it, as on the
// queue; the others succeed.
func TestSubmitDueFailedRunExits1(t *testing.T) {
	e := newEnv(t, scenario.Due, map[string]string{
		"record.sh": "#!/bin/sh\nif [ \"$PIPEC_INTERVAL\" = 2024-01-02 ]; then echo broken >&2; exit 3; fi\n",
	})
	e.worker("w1")
	code, out := e.run(pipecBin, "submit", "pipeline.hcl", "--due", "--now", "2024-01-03T00:00:00Z", "--state", e.url,
		"--engine", e.engine, "--wait", "--poll", "20ms")
	for _, want := range []string{
		"2024-01-01  due/2024-01-01/r1 succeeded\n",
		"2024-01-02  due/2024-01-02/r1 FAILED (pipec events due/2024-01-02/r1)\n",
		"due: 1 of 2 run(s) succeeded; 1 failed\n",
	} {
		if code != 1 || !strings.Contains(out, want) {
			t.Fatalf("submit --due --wait with a failing run: exit %d, want 1 and %q\n%s", code, want, out)
		}
	}
}
