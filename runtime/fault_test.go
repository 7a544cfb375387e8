package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/artifacts"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
)

const poisonHCL = `
pipeline "poison" {
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  error "transient" {
    exit_codes = [75]
    match      = ["connection reset"]
  }
  error "schema" {
    exit_codes    = [65]
    deterministic = true
  }
  retry "default" {
    max_attempts = 4
    initial      = "100ms"
    multiplier   = 2
    max_delay    = "10s"
    jitter       = "none"
    on           = ["transient"]
  }
  task "bad_schema" {
    command = ["./fail.sh", "65", "unexpected header: id;amount"]
    retry   = "default"
  }
  task "flaky" {
    command = ["./fail.sh", "1", "read: connection reset by peer"]
    retry   = "default"
  }
  task "after_bad" {
    command    = ["true"]
    depends_on = ["bad_schema"]
  }
  task "independent" {
    command = ["true"]
  }
}
`

// TestPoisonPill is fault test 4: a deterministic failure runs once and keeps
// its error; a transient one is retried up to max_attempts with growing
// delays, read from the attempts' recorded start times.
func TestPoisonPill(t *testing.T) {
	f := newFixture(t, poisonHCL, map[string]string{"fail.sh": `echo "$2" >&2; exit "$1"`})
	sum := f.run(f.options("2024-01-01"))
	if !sum.Failed {
		t.Fatalf("run did not fail:\n%s", sum.text())
	}
	bad := sum.task("bad_schema")
	if bad.State != TaskFailed || bad.Attempts != 1 || bad.Class != "schema" || bad.ExitCode != 65 ||
		!strings.Contains(bad.Error, "unexpected header: id;amount") || !strings.Contains(bad.Reason, "deterministic") {
		t.Errorf("bad_schema = %+v", bad)
	}
	flaky := sum.task("flaky")
	if flaky.State != TaskFailed || flaky.Attempts != 4 || flaky.Class != "transient" || !strings.Contains(flaky.Reason, "4 of 4") {
		t.Errorf("flaky = %+v", flaky)
	}
	if a := sum.task("after_bad"); a.State != TaskNotRun || !strings.Contains(a.Reason, "needs bad_schema, which failed (schema)") {
		t.Errorf("after_bad = %+v", a)
	}
	if a := sum.task("independent"); a.State != TaskSucceeded {
		t.Errorf("independent branch = %+v", a)
	}
	as, err := f.st.Attempts(context.Background(), sum.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var starts []time.Time
	for _, a := range as {
		if a.Task == "flaky" {
			starts = append(starts, a.Started)
			if a.Class != "transient" || a.State != store.AttemptFailed {
				t.Errorf("flaky attempt %d: %+v", a.Number, a)
			}
		}
		if a.Task == "bad_schema" && a.Number > 1 {
			t.Errorf("deterministic failure retried: %+v", a)
		}
	}
	if len(starts) != 4 {
		t.Fatalf("flaky started %d times", len(starts))
	}
	// Backoff 100ms, 200ms, 400ms (no jitter): the recorded start times are
	// at least that far apart (a lower bound: a loaded machine adds to it),
	// and the delays the runtime recorded grow.
	for i := 1; i < len(starts); i++ {
		gap := starts[i].Sub(starts[i-1])
		if want := 100 * time.Millisecond << (i - 1); gap < want {
			t.Errorf("gap before attempt %d = %s, want >= %s", i+1, gap, want)
		}
	}
	evs, err := f.st.Events(context.Background(), sum.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var delays []int64
	for _, e := range evs {
		if e.Kind == EventAttemptRetry && e.Task == "flaky" {
			var p struct {
				DelayMS int64 `json:"delay_ms"`
			}
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			delays = append(delays, p.DelayMS)
		}
	}
	if !slices.Equal(delays, []int64{100, 200, 400}) {
		t.Errorf("recorded retry delays = %v, want [100 200 400]", delays)
	}
	text := sum.text()
	for _, want := range []string{"bad_schema", "class schema", "exit code 65", "unexpected header: id;amount"} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q:\n%s", want, text)
		}
	}
}

const intervalHCL = `
pipeline "days" {
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw"]
  }
  check "raw_ok" {
    input         = "raw"
    row_count_min = 1
  }
  task "clean" {
    command = ["./clean.sh"]
    inputs  = ["raw"]
    outputs = ["clean"]
  }
  task "compare" {
    command = ["./compare.sh"]
    inputs  = ["clean", "clean@-1"]
  }
}
`

// TestWrongInterval is fault test 3: an accepted artifact of 2024-01-01 does
// not satisfy a task running for 2024-01-02, even though the task that
// produces it succeeded (a green flag is not an accepted artifact); and an
// input at offset -1 reads the previous interval's accepted version.
func TestWrongInterval(t *testing.T) {
	f := newFixture(t, intervalHCL, map[string]string{
		// Day 2 writes an empty table: extract succeeds, its check rejects it.
		"extract.sh": `echo "id" > "$PIPEC_OUTPUT_raw/raw.csv"
case "$PIPEC_INTERVAL_START" in 2024-01-02*) ;; *) echo 1 >> "$PIPEC_OUTPUT_raw/raw.csv";; esac`,
		"clean.sh":   `cp "$PIPEC_INPUT_raw/raw.csv" "$PIPEC_OUTPUT_clean/clean.csv"; echo "$PIPEC_INTERVAL_START" > "$PIPEC_OUTPUT_clean/day"`,
		"compare.sh": `echo "today $(cat "$PIPEC_INPUT_clean/day") yesterday $([ -n "${PIPEC_INPUT_clean_PREV:-}" ] && cat "$PIPEC_INPUT_clean_PREV/day")" > "$PWD/compare.$PIPEC_INTERVAL"`,
	})
	day1 := f.run(f.options("2024-01-01"))
	// On the first day of the schedule there is no previous interval: the
	// -1 input is absent (unset), not missing.
	if day1.Failed {
		t.Fatalf("day 1:\n%s", day1.text())
	}
	b, _ := os.ReadFile(filepath.Join(f.dir, "compare.2024-01-01"))
	if got := strings.TrimSpace(string(b)); got != "today 2024-01-01T00:00:00Z yesterday" {
		t.Errorf("day 1 compare = %q", got)
	}

	day2 := f.run(f.options("2024-01-02"))
	if ex := day2.task("extract"); ex.State != TaskSucceeded {
		t.Fatalf("day 2 extract = %+v", ex)
	}
	cl := day2.task("clean")
	if cl.State != TaskNotRun || !strings.Contains(cl.Reason, "input raw was not accepted in this run: check raw_ok failed") {
		t.Errorf("day 2 clean ran on another interval's artifact: %+v\n%s", cl, day2.text())
	}
	if !day2.Failed {
		t.Error("day 2 should fail (its check rejected raw)")
	}

	// Day 3 needs clean@-1 (day 2), which was never accepted.
	day3 := f.run(f.options("2024-01-03"))
	if c := day3.task("compare"); c.State != TaskNotRun || !strings.Contains(c.Reason, "input clean@-1 has no accepted version for interval 2024-01-02") {
		t.Errorf("day 3 compare = %+v", c)
	}
	// Once day 2 is repaired, day 3 reads day 2's version through PIPEC_INPUT_clean_PREV.
	if err := os.WriteFile(filepath.Join(f.dir, "extract.sh"), []byte("#!/bin/sh\nprintf 'id\\n1\\n' > \"$PIPEC_OUTPUT_raw/raw.csv\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if s := f.run(f.options("2024-01-02")); s.Failed {
		t.Fatalf("day 2 rerun:\n%s", s.text())
	}
	if s := f.run(f.options("2024-01-03")); s.Failed {
		t.Fatalf("day 3 rerun:\n%s", s.text())
	}
	b, _ = os.ReadFile(filepath.Join(f.dir, "compare.2024-01-03"))
	if got := strings.TrimSpace(string(b)); got != "today 2024-01-03T00:00:00Z yesterday 2024-01-02T00:00:00Z" {
		t.Errorf("day 3 compare = %q", got)
	}
}

// TestLostResponse is fault test 2: a publish whose compare-and-swap
// succeeded in the store but whose caller crashed before swapping the link
// and recording anything is completed by the rerun, without a second version
// and without failing.
func TestLostResponse(t *testing.T) {
	f := newFixture(t, ordersHCL, ordersScripts)
	// The crashed run: everything up to the accepted version, then the
	// store's swap, then nothing (no link, no runtime events).
	noPublish := *f.plan
	noPublish.Publishes = nil
	first := f.run(Options{Plan: &noPublish, BaseDir: f.dir, Interval: "2024-01-01", Store: f.st, StatePath: f.state,
		Environ: os.Environ()})
	if first.Failed {
		t.Fatalf("first run:\n%s", first.text())
	}
	ctx := context.Background()
	v, err := f.st.AcceptedVersion(ctx, f.plan.Pipeline, "clean", "2024-01-01")
	if err != nil {
		t.Fatal(err)
	}
	// The publish: copy into the sink, swap the pointer, swap the link; then
	// the crash took the link swap back (it never reached the disk) and the
	// runtime never heard the answer.
	d, err := sink.NewDirectory("wh", filepath.Join(f.dir, "warehouse/clean"), "token", f.st)
	if err != nil {
		t.Fatal(err)
	}
	// The run's artifact store: the default one, beside the state.
	arts, err := artifacts.NewFolder(filepath.Join(filepath.Dir(f.state), "versions"))
	if err != nil {
		t.Fatal(err)
	}
	d.Files = func(ctx context.Context, v store.Version) (string, error) {
		return artifacts.Files(ctx, arts, v.Location)
	}
	res, err := d.Publish(ctx, v)
	if err != nil || res.Outcome != store.Won {
		t.Fatalf("publish: %+v, %v", res, err)
	}
	link := filepath.Join(f.dir, "warehouse/clean/2024-01-01")
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}

	var ev events
	o := f.options("2024-01-01")
	o.OnEvent = ev.add
	// The rerun reconciles the link, reuses the task and republishes
	// idempotently.
	sum := f.run(o)
	if sum.Failed {
		t.Fatalf("rerun failed:\n%s", sum.text())
	}
	if len(sum.Publish) != 1 || sum.Publish[0].Outcome != string(store.Idempotent) || sum.Publish[0].Token != v.Token {
		t.Fatalf("publish = %+v", sum.Publish)
	}
	if tr := sum.task("clean"); tr.State != TaskReused {
		t.Errorf("clean = %+v", tr)
	}
	if !slices.Contains(ev.kinds(""), EventSinkReconciled) {
		t.Errorf("no %s event: %v", EventSinkReconciled, ev.kinds(""))
	}
	entries, err := os.ReadDir(filepath.Join(f.dir, "warehouse/clean/.versions"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("%d versions in the sink, want 1", len(entries))
	}
	b, err := os.ReadFile(filepath.Join(link, "clean.csv"))
	if err != nil || string(b) != "id,v\n2,b\n1,a\n" {
		t.Errorf("visible = %q, %v", b, err)
	}
	p, err := f.st.Pointer(ctx, f.plan.Pipeline, "wh", "clean", "2024-01-01")
	if err != nil || p.Version != v.ID || p.Token != v.Token {
		t.Errorf("pointer = %+v, %v", p, err)
	}
}

// TestRetryBudget: a systemic failure does not become a retry storm; the
// run's budget (ratio × first attempts, at least min) caps the retries of all
// tasks together.
func TestRetryBudget(t *testing.T) {
	var b strings.Builder
	b.WriteString(`pipeline "storm" {
  retry_budget {
    ratio = 0.2
    min   = 2
  }
  retry "r" {
    max_attempts = 5
    initial      = "1ms"
    jitter       = "none"
  }
`)
	for i := 0; i < 5; i++ {
		fmt.Fprintf(&b, "  task \"t%d\" {\n    command = [\"sh\", \"-c\", \"exit 1\"]\n    retry   = \"r\"\n  }\n", i)
	}
	b.WriteString("}\n")
	f := newFixture(t, b.String(), nil)
	sum := f.run(f.options("2024-01-01"))
	total := 0
	budgetSpent := 0
	for _, tr := range sum.Tasks {
		total += tr.Attempts
		if strings.Contains(tr.Reason, "retry budget is spent") {
			budgetSpent++
		}
	}
	// 5 first attempts; max(2, 0.2 × 5 = 1) = 2 retries for the whole run.
	if total != 7 || budgetSpent != 5 {
		t.Errorf("%d attempts, %d tasks stopped by the budget, want 7 and 5:\n%s", total, budgetSpent, sum.text())
	}
}
