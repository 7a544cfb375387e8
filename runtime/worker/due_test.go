package worker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/store"
)

// TestSubmitDue: pipec submit --due hands the missed intervals to real
// pipec worker processes, never more than max_active_runs at once though
// the workers have 4 slots between them, follows them with --wait, and a
// second --due finds nothing due; without --wait it returns once the last
// interval is handed over.
func TestSubmitDue(t *testing.T) {
	e := newEnv(t, scenario.Due, scenario.DueFiles())
	e.worker("w1", "--slots", "2")
	e.worker("w2", "--slots", "2")
	code, out := e.pipec("submit", "pipeline.hcl", "--due", "--now", "2024-01-06T00:00:00Z", "--state", e.url, "--wait", "--poll", "20ms")
	if code != 0 {
		t.Fatalf("submit --due --wait: exit %d\n%s", code, out)
	}
	for _, want := range []string{
		"due due at 2024-01-06T00:00:00Z: latest due interval 2024-01-05 (catchup = true: 5 due interval(s) from 2024-01-01)\n",
		"  to run:       5 interval(s), 2 at a time (schedule max_active_runs)\n",
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
	// Every run was a worker's.
	for _, iv := range []string{"2024-01-01", "2024-01-05"} {
		if w := e.starts("due/"+iv+"/r1", "record"); len(w) != 1 || (w[0] != "w1" && w[0] != "w2") {
			t.Errorf("starts of %s: %v", iv, w)
		}
	}
	code, out = e.pipec("submit", "pipeline.hcl", "--due", "--now", "2024-01-06T00:00:00Z", "--state", e.url)
	if code != 0 || !strings.Contains(out, "  skip 2024-01-01 to 2024-01-05 (5): succeeded\nnothing due\n") {
		t.Fatalf("second submit --due: exit %d\n%s", code, out)
	}
	// Without --wait: three more are due; it hands over two, the third as
	// soon as one of them ends, and returns.
	code, out = e.pipec("submit", "pipeline.hcl", "--due", "--now", "2024-01-09T00:00:00Z", "--state", e.url, "--poll", "20ms")
	if code != 0 || !strings.Contains(out, "2024-01-08  submitted due/2024-01-08/r1") || !strings.Contains(out, "running on the workers") {
		t.Fatalf("submit --due: exit %d\n%s", code, out)
	}
	// 2024-01-08 is still with the workers (it waits for release): the
	// next --due names it, in progress, and submits it no second time.
	code, out = e.pipec("submit", "pipeline.hcl", "--due", "--now", "2024-01-09T00:00:00Z", "--state", e.url)
	if code != 0 || !strings.Contains(out, "  active 2024-01-08: a run of it is active: due/2024-01-08/r1 (submitted to the workers)\n") ||
		!strings.Contains(out, "\nnothing due\n") {
		t.Fatalf("submit --due beside a submitted run: exit %d\n%s", code, out)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, iv := range []string{"2024-01-06", "2024-01-07", "2024-01-08"} {
		if rs := e.until("due/"+iv+"/r1", "the run's end", finished); rs.Run.State != store.RunSucceeded {
			t.Errorf("%s: %s", iv, rs.Run.State)
		}
	}
	if runs, top, err := scenario.MostAtOnce(filepath.Join(e.dir, "times.log")); err != nil || runs != 8 || top > 2 {
		t.Errorf("%d runs, %d at once (%v); want 8, at most 2", runs, top, err)
	}
}

// TestBackfillSubmit: pipec backfill --submit --wait hands examples/backfill's
// intervals to two real workers one after the other (totals reads the day
// before), each published by a worker; after a code_version change,
// --stale --submit rebuilds exactly the published intervals.
func TestBackfillSubmit(t *testing.T) {
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
	code, out := e.pipec("backfill", "pipeline.hcl", "--from", "2024-01-01", "--to", "2024-01-03", "--submit", "--wait", "--state", e.url, "--poll", "20ms")
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
	}
	// The logic fix.
	b, _ := os.ReadFile(filepath.Join(e.dir, "pipeline.hcl"))
	if err := os.WriteFile(filepath.Join(e.dir, "pipeline.hcl"), []byte(strings.ReplaceAll(string(b), "2024.06.1", "2024.07.1")), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = e.pipec("backfill", "pipeline.hcl", "--from", "2024-01-01", "--to", "2024-01-04", "--stale", "--submit", "--wait", "--state", e.url, "--poll", "20ms")
	if code != 0 || !strings.Contains(out, "  skip 2024-01-04: not stale: not published\n") || !strings.Contains(out, "backfill: 3 of 3 run(s) succeeded; 1 skipped\n") {
		t.Fatalf("backfill --stale --submit --wait: exit %d\n%s", code, out)
	}
	lineage, err := os.ReadFile(filepath.Join(e.dir, "marts", "daily_totals", "2024-01-03", "_pipec.json"))
	if err != nil || !strings.Contains(string(lineage), `"code_version": "2024.07.1"`) || !strings.Contains(string(lineage), "daily_totals/2024-01-03/r2") {
		t.Fatalf("lineage after the rebuild: %v\n%s", err, lineage)
	}
}
