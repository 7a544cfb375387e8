package schedule

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

// dailyPlan is examples/backfill's shape: daily from 2024-01-01, totals
// reading the previous day's totals, one publish.
func dailyPlan(codeVersion string, catchup bool, maxActive int) *compiler.Plan {
	return &compiler.Plan{
		Pipeline:    "daily",
		CodeVersion: codeVersion,
		Schedule:    &compiler.PlanSchedule{Every: "24h0m0s", Start: "2024-01-01T00:00:00Z", Catchup: catchup, MaxActiveRuns: maxActive},
		Tasks: []compiler.PlanTask{
			{Name: "events", Outputs: []string{"day_events"}},
			{Name: "totals", Inputs: []compiler.PlanInput{{Artifact: "day_events"}, {Artifact: "totals", Offset: -1}},
				Outputs: []string{"totals"}, Needs: []string{"events"}},
		},
		Publishes: []compiler.PlanPublish{{Name: "mart", Artifact: "totals", Sink: "marts"}},
	}
}

func openStore(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func interval(t testing.TB, p *compiler.Plan, key string) runtime.Interval {
	t.Helper()
	iv, err := runtime.ResolveInterval(p.Schedule, key)
	if err != nil {
		t.Fatal(err)
	}
	return iv
}

// runOf records a run of the interval at codeVersion that ends as state;
// published, its totals version is accepted and shown by the sink.
func runOf(t testing.TB, s store.Store, p *compiler.Plan, key, codeVersion string, state store.RunState, published bool) store.Run {
	t.Helper()
	ctx := context.Background()
	iv := interval(t, p, key)
	r, err := s.CreateRun(ctx, store.NewRun{Pipeline: p.Pipeline, Interval: key, IntervalStart: iv.Start, IntervalEnd: iv.End,
		CodeVersion: codeVersion, PlanDigest: "sha256:p"})
	if err != nil {
		t.Fatal(err)
	}
	if published {
		a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: r.ID, Task: "totals", Resource: store.FenceResource(p.Pipeline, key)})
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.RecordVersion(ctx, store.Version{Artifact: "totals", Interval: key, Digest: "sha256:" + key + codeVersion,
			Run: r.ID, Task: "totals", Attempt: a.Number, Location: "/staging"})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.AcceptVersion(ctx, v.ID); err != nil {
			t.Fatal(err)
		}
		if res, err := s.CompareAndSwapPointer(ctx, store.Swap{Pipeline: p.Pipeline, Sink: "marts", Artifact: "totals", Interval: key,
			Version: v.ID, Token: a.Token}); err != nil || res.Outcome != store.Won {
			t.Fatalf("publish %s: %v %v", key, res.Outcome, err)
		}
		if err := s.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptSucceeded}); err != nil {
			t.Fatal(err)
		}
	}
	if state != store.RunRunning {
		if err := s.FinishRun(ctx, r.ID, state); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// queueOf is the workers' side of s, as pipec opens it.
func queueOf(s store.Store) queue.Queue {
	q, _ := s.(queue.Queue)
	return q
}

func read(t testing.TB, s store.Store, p *compiler.Plan) *Facts {
	t.Helper()
	f, err := Read(context.Background(), s, queueOf(s), p)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// show prints decisions one a line: "2024-01-01 run", "2024-01-02 skip: …".
func show(ds []Decision) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "%s %s", d.Interval.Key, d.Action)
		if d.Action != Run {
			fmt.Fprintf(&b, ": %s", d.Why)
		}
		if len(d.Needs) > 0 {
			fmt.Fprintf(&b, " needs %v", d.Needs)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestLatest(t *testing.T) {
	p := dailyPlan("1", false, 1)
	for _, c := range []struct {
		now, latest string // "" latest: none due
	}{
		{"2023-06-01T00:00:00Z", ""},
		{"2024-01-01T23:59:59Z", ""},
		{"2024-01-02T00:00:00Z", "2024-01-01"}, // due the moment it is over
		{"2024-01-05T03:00:00Z", "2024-01-04"},
	} {
		latest, first, ok, err := Latest(p, at(c.now))
		if err != nil {
			t.Fatal(err)
		}
		if first.Key != "2024-01-01" {
			t.Errorf("now %s: first %s", c.now, first.Key)
		}
		if got := map[bool]string{true: latest.Key}[ok]; got != c.latest {
			t.Errorf("now %s: latest %q, want %q", c.now, got, c.latest)
		}
	}
	// Without a start, intervals count from the epoch.
	p.Schedule = &compiler.PlanSchedule{Every: "6h"}
	latest, _, ok, err := Latest(p, at("2024-01-01T13:00:00Z"))
	if err != nil || !ok || latest.Key != "2024-01-01T06:00:00Z" {
		t.Errorf("every 6h, no start, at 13:00: %s %v %v", latest.Key, ok, err)
	}
	if _, _, _, err := Latest(p, at("9999-01-01T00:00:00Z")); err == nil || !strings.Contains(err.Error(), "too far after") {
		t.Errorf("a now 8,000 years on: %v", err)
	}
	p.Schedule = nil
	if _, _, _, err := Latest(p, at("2024-01-01T13:00:00Z")); err == nil || !strings.Contains(err.Error(), "no schedule") {
		t.Errorf("no schedule: %v", err)
	}
}

func TestDueWithoutCatchupIsTheLatestOnly(t *testing.T) {
	s := openStore(t)
	p := dailyPlan("1", false, 1)
	ctx := context.Background()
	d, err := read(t, s, p).Due(ctx, at("2024-01-05T03:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := show(d.Decisions), "2024-01-04 blocked: input totals@-1 of task totals: interval 2024-01-03 has no accepted version (not complete, and not in this batch)\n"; got != want {
		t.Errorf("nothing ran:\n%s\nwant\n%s", got, want)
	}
	runOf(t, s, p, "2024-01-03", "1", store.RunSucceeded, true)
	d, _ = read(t, s, p).Due(ctx, at("2024-01-05T03:00:00Z"))
	if got, want := show(d.Decisions), "2024-01-04 run\n"; got != want {
		t.Errorf("the day before published:\n%s\nwant\n%s", got, want)
	}
	r := runOf(t, s, p, "2024-01-04", "1", store.RunSucceeded, true)
	d, _ = read(t, s, p).Due(ctx, at("2024-01-05T23:00:00Z"))
	if got, want := show(d.Decisions), "2024-01-04 skip: succeeded in "+r.ID+"\n"; got != want {
		t.Errorf("latest succeeded:\n%s\nwant\n%s", got, want)
	}
	d, _ = read(t, s, p).Due(ctx, at("2023-12-01T00:00:00Z"))
	if d.Any || len(d.Decisions) != 0 || d.First.End != at("2024-01-02T00:00:00Z") {
		t.Errorf("before the first interval ends: %+v", d)
	}
}

func TestDueCatchupRunsEveryMissedInterval(t *testing.T) {
	s := openStore(t)
	p := dailyPlan("1", true, 2)
	ctx := context.Background()
	runOf(t, s, p, "2024-01-01", "1", store.RunSucceeded, true)
	r3 := runOf(t, s, p, "2024-01-03", "1", store.RunSucceeded, true)
	runOf(t, s, p, "2024-01-04", "1", store.RunFailed, false) // failed: still missed
	d, err := read(t, s, p).Due(ctx, at("2024-01-06T00:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	want := "2024-01-01 skip: succeeded in daily/2024-01-01/r1\n" +
		"2024-01-02 run\n" +
		"2024-01-03 skip: succeeded in " + r3.ID + "\n" +
		"2024-01-04 run\n" +
		"2024-01-05 run needs [3]\n"
	if got := show(d.Decisions); got != want {
		t.Errorf("catch-up:\n%s\nwant\n%s", got, want)
	}
	if n, why := Slots(p); n != 1 || !strings.Contains(why, "totals reads totals@-1") {
		t.Errorf("Slots = %d, %s", n, why)
	}
	p.Tasks[1].Inputs = p.Tasks[1].Inputs[:1]
	if n, why := Slots(p); n != 2 || why != "schedule max_active_runs" {
		t.Errorf("Slots without the earlier-interval input = %d, %s", n, why)
	}
}

func TestDueCatchupWithoutStartBeginsAfterTheLastSuccess(t *testing.T) {
	s := openStore(t)
	p := dailyPlan("1", true, 1)
	p.Schedule.Start = ""
	p.Tasks[1].Inputs = p.Tasks[1].Inputs[:1]
	ctx := context.Background()
	d, err := read(t, s, p).Due(ctx, at("2024-01-06T00:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := show(d.Decisions), "2024-01-05 run\n"; got != want {
		t.Errorf("nothing ever succeeded:\n%s\nwant\n%s", got, want)
	}
	runOf(t, s, p, "2024-01-02", "1", store.RunSucceeded, true)
	d, _ = read(t, s, p).Due(ctx, at("2024-01-06T00:00:00Z"))
	if got, want := show(d.Decisions), "2024-01-03 run\n2024-01-04 run\n2024-01-05 run\n"; got != want {
		t.Errorf("after 2024-01-02 succeeded:\n%s\nwant\n%s", got, want)
	}
}

func TestActiveRunsAreSkippedAndNamed(t *testing.T) {
	s := openStore(t)
	p := dailyPlan("1", true, 3)
	p.Tasks[1].Inputs = p.Tasks[1].Inputs[:1]
	ctx := context.Background()
	live, err := s.CreateRun(ctx, store.NewRun{Pipeline: "daily", Interval: "2024-01-01", Owner: store.RunOwner{Host: "h1", PID: 42},
		Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// A pipec that died: its lease is over, the next run takes it over.
	if _, err := s.CreateRun(ctx, store.NewRun{Pipeline: "daily", Interval: "2024-01-02", Owner: store.RunOwner{Host: "h1", PID: 43},
		Lease: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	// Handed to workers (a real submission of the SQLite queue): no lease,
	// in progress until the workers finish it.
	iv3 := interval(t, p, "2024-01-03")
	sub, err := s.Submit(ctx, queue.Submission{Run: store.NewRun{Pipeline: "daily", Interval: iv3.Key,
		IntervalStart: iv3.Start, IntervalEnd: iv3.End}, Plan: []byte("{}"), BaseDir: "/spec", Interval: iv3.Key,
		Tasks: []queue.Task{{Name: "events"}}})
	if err != nil {
		t.Fatal(err)
	}
	// No lease and no submission: a leftover whose lease row a later run
	// took before it died too; it blocks nothing.
	if _, err := s.CreateRun(ctx, store.NewRun{Pipeline: "daily", Interval: "2024-01-04"}); err != nil {
		t.Fatal(err)
	}
	f := read(t, s, p)
	d, err := f.Due(ctx, at("2024-01-05T00:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	want := "2024-01-01 active: a run of it is active: " + live.ID + " (host h1, pid 42, since " + live.Created.Format(time.RFC3339) + ")\n" +
		"2024-01-02 run\n" +
		"2024-01-03 active: a run of it is active: " + sub.ID + " (submitted to the workers)\n" +
		"2024-01-04 run\n"
	if got := show(d.Decisions); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := len(f.ActiveRuns()); got != 2 {
		t.Errorf("ActiveRuns = %v", f.ActiveRuns())
	}
}

func TestBackfillSkipsCompleteAndSelectsStale(t *testing.T) {
	s := openStore(t)
	old := dailyPlan("2024.06.1", false, 1)
	ctx := context.Background()
	for _, k := range []string{"2024-01-01", "2024-01-02", "2024-01-03"} {
		runOf(t, s, old, k, "2024.06.1", store.RunSucceeded, true)
	}
	ivs, err := Intervals(interval(t, old, "2024-01-01"), interval(t, old, "2024-01-05"))
	if err != nil {
		t.Fatal(err)
	}
	ds, err := read(t, s, old).Backfill(ctx, ivs, RebuildGaps)
	if err != nil {
		t.Fatal(err)
	}
	want := "2024-01-01 skip: complete at code_version 2024.06.1\n" +
		"2024-01-02 skip: complete at code_version 2024.06.1\n" +
		"2024-01-03 skip: complete at code_version 2024.06.1\n" +
		"2024-01-04 run\n" +
		"2024-01-05 run needs [3]\n"
	if got := show(ds); got != want {
		t.Errorf("backfill at the same code_version:\n%s\nwant\n%s", got, want)
	}
	// A logic fix: the spec's code_version moves on.
	fixed := dailyPlan("2024.07.1", false, 1)
	runOf(t, s, fixed, "2024-01-02", "2024.07.1", store.RunSucceeded, true) // rebuilt already
	f := read(t, s, fixed)
	ds, err = f.Backfill(ctx, ivs, RebuildStale)
	if err != nil {
		t.Fatal(err)
	}
	// 2024-01-02 is complete at the new code_version, but it read
	// 2024-01-01 (an input at -1), which this backfill rebuilds: it runs
	// again after it, and 2024-01-03 after both.
	want = "2024-01-01 run\n" +
		"2024-01-02 run needs [0]\n" +
		"2024-01-03 run needs [1]\n" +
		"2024-01-04 skip: not stale: not published\n" +
		"2024-01-05 skip: not stale: not published\n"
	if got := show(ds); got != want {
		t.Errorf("--stale:\n%s\nwant\n%s", got, want)
	}
	if why := ds[1].Why; !strings.HasPrefix(why, "stale: task ") || !strings.HasSuffix(why, " of 2024-01-01, which this backfill rebuilds first") {
		t.Errorf("2024-01-02 runs because %q", why)
	}
	if st := f.Status(ivs[0]); st.State != Stale || !strings.Contains(st.Why, "mart shows code_version 2024.06.1 (daily/2024-01-01/r1); the spec's is 2024.07.1") {
		t.Errorf("status of a stale interval: %+v", st)
	}
	// Without --stale, stale and missing intervals all run.
	ds, _ = f.Backfill(ctx, ivs, RebuildGaps)
	if got, want := show(ds), "2024-01-01 run\n2024-01-02 skip: complete at code_version 2024.07.1\n2024-01-03 run\n2024-01-04 run needs [2]\n2024-01-05 run needs [3]\n"; got != want {
		t.Errorf("backfill after the fix:\n%s\nwant\n%s", got, want)
	}
}

func TestBlockedByAnEarlierInterval(t *testing.T) {
	s := openStore(t)
	p := dailyPlan("1", false, 1)
	ctx := context.Background()
	ivs, err := Intervals(interval(t, p, "2024-01-03"), interval(t, p, "2024-01-04"))
	if err != nil {
		t.Fatal(err)
	}
	ds, err := read(t, s, p).Backfill(ctx, ivs, RebuildGaps)
	if err != nil {
		t.Fatal(err)
	}
	want := "2024-01-03 blocked: input totals@-1 of task totals: interval 2024-01-02 has no accepted version (not complete, and not in this batch)\n" +
		"2024-01-04 blocked: input totals@-1 of task totals: interval 2024-01-03 is blocked too\n"
	if got := show(ds); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// Being run by someone else: named.
	r, err := s.CreateRun(ctx, store.NewRun{Pipeline: "daily", Interval: "2024-01-02", Owner: store.RunOwner{Host: "h9", PID: 9}, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ds, _ = read(t, s, p).Backfill(ctx, ivs[:1], RebuildGaps)
	if got := show(ds); !strings.Contains(got, "interval 2024-01-02 has no accepted version yet: a run of it is active: "+r.ID+" (host h9, pid 9") {
		t.Errorf("blocked by an active run of the day before: %s", got)
	}
	// The first interval reads nothing before the schedule's start.
	ivs, _ = Intervals(interval(t, p, "2024-01-01"), interval(t, p, "2024-01-01"))
	ds, _ = read(t, s, p).Backfill(ctx, ivs, RebuildGaps)
	if got := show(ds); got != "2024-01-01 run\n" {
		t.Errorf("the schedule's first interval: %s", got)
	}
}

func TestIntervalsBounded(t *testing.T) {
	p := dailyPlan("1", false, 1)
	p.Schedule.Every = "1m"
	if _, err := Intervals(interval(t, p, "2024-01-01"), interval(t, p, "2025-01-01")); err == nil ||
		!strings.Contains(err.Error(), "more than 100000 intervals") {
		t.Errorf("a year of minutes: %v", err)
	}
	if _, err := Intervals(interval(t, p, "2024-01-02"), interval(t, p, "2024-01-01")); err == nil {
		t.Error("last before first: no error")
	}
}
