package webview

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/exec"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

// fakeClock advances by a step on every reading, so events and attempts of
// a hand-made run have distinct, increasing times.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(10 * time.Millisecond)
	return c.t
}

const (
	hostileTask = "<script>alert('t')</script>\x1b[31mred\u202e"
	hostileCode = `v1"><img src=x onerror=alert(1)>`
	secret      = "hunter2-SECRET-value"
)

type fixture struct {
	st  *sqlite.Store
	src *Source
	run string
}

// newFixture makes a state with one run by hand: a task that failed once
// and succeeded on its retry, a task whose attempt 1 went unknown, was
// relaunched and published late (fenced), and a task with a hostile name
// whose error tail holds a secret the runtime would have masked; the run
// was forced (--force).
func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	clk := &fakeClock{t: time.Date(2024, 1, 2, 3, 0, 0, 0, time.UTC)}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"), sqlite.Options{Clock: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	run, err := st.CreateRun(ctx, store.NewRun{Pipeline: "demo", Interval: "2024-01-01", CodeVersion: hostileCode,
		Owner: store.RunOwner{Host: "box", PID: 42}, Lease: time.Hour, Forced: true})
	if err != nil {
		t.Fatal(err)
	}
	res := store.FenceResource("demo", "2024-01-01")
	attempt := func(task string, o *store.Outcome) store.Attempt {
		a, err := st.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: task, Resource: res, Worker: "box:42", Queued: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.MarkRunning(ctx, a.AttemptRef, 100+a.Number, 0); err != nil {
			t.Fatal(err)
		}
		if o != nil {
			if err := st.FinishAttempt(ctx, a.AttemptRef, *o); err != nil {
				t.Fatal(err)
			}
		}
		return a
	}
	ev := func(kind, task string, n int, payload string) {
		if _, err := st.AppendEvent(ctx, store.Event{Run: run.ID, Kind: kind, Task: task, Attempt: n, Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	attempt("extract", &store.Outcome{State: store.AttemptFailed, Class: "transient", ExitCode: 75, ErrorTail: "connection reset"})
	ev("attempt.retry", "extract", 1, `{"class":"transient","delay_ms":10,"next_attempt":2}`)
	attempt("extract", &store.Outcome{State: store.AttemptSucceeded})
	ev("task.succeeded", "extract", 0, `{}`)

	// write#1 is stopped, goes unknown; write#2 publishes; write#1 comes
	// back and its publish is fenced.
	w1 := attempt("write", nil)
	ev(store.EventAttemptUnknown, "write", 1, fmt.Sprintf(`{"token":%d}`, w1.Token))
	ev("attempt.relaunch", "write", 1, `{"reason":"lease expired"}`)
	attempt("write", &store.Outcome{State: store.AttemptSucceeded})
	v2, err := st.RecordVersion(ctx, store.Version{Artifact: "part", Interval: "2024-01-01", Digest: "sha256:bbbb", Run: run.ID, Task: "write", Attempt: 2})
	if err != nil {
		t.Fatal(err)
	}
	st.AcceptVersion(ctx, v2.ID)
	ev("check.passed", "write", 2, fmt.Sprintf(`{"artifact":"part","check":"part_ok","version":%d}`, v2.ID))
	if r, err := st.CompareAndSwapPointer(ctx, store.Swap{Pipeline: "demo", Sink: "out", Artifact: "part", Interval: "2024-01-01", Version: v2.ID, Token: v2.Token}); err != nil || r.Outcome != store.Won {
		t.Fatal(r, err)
	}
	if err := st.FinishAttempt(ctx, w1.AttemptRef, store.Outcome{State: store.AttemptSucceeded}); err != nil {
		t.Fatal(err)
	}
	v1, err := st.RecordVersion(ctx, store.Version{Artifact: "part", Interval: "2024-01-01", Digest: "sha256:aaaa", Run: run.ID, Task: "write", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	st.AcceptVersion(ctx, v1.ID)
	if r, err := st.CompareAndSwapPointer(ctx, store.Swap{Pipeline: "demo", Sink: "out", Artifact: "part", Interval: "2024-01-01", Version: v1.ID, Token: v1.Token}); err != nil || r.Outcome != store.Fenced {
		t.Fatal(r, err)
	}
	ev("task.succeeded", "write", 0, `{}`)
	ev("output.rejected", "extract", 2, `{"artifact":"raw","reason":"output raw: leak is a symbolic link (to /etc/hostname): an output holds files and folders only"}`)
	ev("check.failed", "write", 1, `{"check":"part_ok","artifact":"part","version":1,"label":"part@2024-01-01","reason":"unique (\"id\"): 1 duplicate row(s)"}`)

	// The hostile task; its tail holds a secret (a state written before
	// masking, or by hand): the viewer's redactor masks it.
	attempt(hostileTask, &store.Outcome{State: store.AttemptFailed, Class: "run_error", ExitCode: 1,
		ErrorTail: "token=" + secret + " <b>bold</b>\x07"})
	ev("task.failed", hostileTask, 0, `{"reason":"`+secret+`"}`)
	if err := st.FinishRun(ctx, run.ID, store.RunFailed); err != nil {
		t.Fatal(err)
	}
	src := &Source{Store: st, Queue: st, Redactor: exec.NewRedactor([]string{secret}), Now: clk.now}
	return &fixture{st: st, src: src, run: run.ID}
}

func (f *fixture) get(t *testing.T, path string) (int, string) {
	t.Helper()
	srv := httptest.NewServer((&Server{Src: f.src, StateName: "test.db"}).Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// clean fails when a page holds the secret, the hostile markup unescaped or
// a raw control character.
func clean(t *testing.T, name, page string) {
	t.Helper()
	if strings.Contains(page, secret) {
		t.Errorf("%s shows the secret", name)
	}
	for _, bad := range []string{"<script>alert", "<img src=x", "<b>bold", "\x1b", "\x07", "\u202e"} {
		if strings.Contains(page, bad) {
			t.Errorf("%s holds %q unescaped", name, bad)
		}
	}
}

func TestRunPage(t *testing.T) {
	f := newFixture(t)
	code, page := f.get(t, "/run?id="+url.QueryEscape(f.run))
	if code != 200 {
		t.Fatalf("status %d\n%s", code, page)
	}
	clean(t, "run page", page)
	atts, _ := f.st.Attempts(context.Background(), f.run)
	// One bar and one table row per attempt, each with its token.
	bars := regexp.MustCompile(`<g class="bar [^"]*" data-task="[^"]*" data-attempt="(\d+)" data-token="(\d+)"`).FindAllStringSubmatch(page, -1)
	if len(bars) != len(atts) {
		t.Fatalf("%d bars, %d attempts", len(bars), len(atts))
	}
	for _, a := range atts {
		if !strings.Contains(page, fmt.Sprintf(`data-attempt="%d" data-token="%d"`, a.Number, a.Token)) {
			t.Errorf("no bar for %s with token %d", a.AttemptRef, a.Token)
		}
	}
	for _, want := range []string{`class="mark m-rejected"`, "output raw rejected: output raw: leak is a symbolic link",
		"check part_ok on part failed: unique (&#34;id&#34;): 1 duplicate row(s)", `class="mark m-fenced"`, `class="mark m-unknown"`, `class="mark m-relaunch"`, `class="mark m-retry"`,
		`data-outcome="fenced"`, `class="bar o-failed"`, "every task ran again (--force)", `href="/artifact?pipeline=demo&amp;name=part"`, "exit code 75", "&lt;script&gt;alert", `\x1b[31mred\u202e`, "***"} {
		if !strings.Contains(page, want) {
			t.Errorf("run page lacks %q", want)
		}
	}
}

// Bars of one task's row are in time order, left to right, and never
// overlap: attempt n+1 starts after attempt n (here ended).
func TestTimelineBarsInTimeOrder(t *testing.T) {
	f := newFixture(t)
	v, err := f.src.LoadRun(context.Background(), f.run)
	if err != nil {
		t.Fatal(err)
	}
	tl := v.Timeline()
	if len(tl.Rows) != 3 {
		t.Fatalf("%d rows", len(tl.Rows))
	}
	for _, r := range tl.Rows {
		for i := 1; i < len(r.Bars); i++ {
			a, b := r.Bars[i-1], r.Bars[i]
			if a.A.Number >= b.A.Number || a.X > b.X {
				t.Errorf("%s: bar #%d at %d before bar #%d at %d", r.Task, b.A.Number, b.X, a.A.Number, a.X)
			}
		}
		for _, b := range r.Bars {
			if b.X < tlLabel || b.X+b.W > tl.W {
				t.Errorf("%s #%d outside the axis: %d+%d", r.Task, b.A.Number, b.X, b.W)
			}
		}
	}
	// Rows in the order their tasks started.
	var names []string
	for _, r := range tl.Rows {
		names = append(names, r.Task)
	}
	if names[0] != "extract" || names[1] != "write" {
		t.Errorf("rows %q", names)
	}
	// extract#1 failed then retried: a wait between the two bars.
	if len(tl.Rows[0].Waits) == 0 {
		t.Error("no waiting drawn for extract")
	}
	// write#1 went unknown where the mark says.
	w := tl.Rows[1]
	if w.Bars[0].UX == 0 || w.Bars[0].A.State != "succeeded" {
		t.Errorf("write#1 bar %+v", w.Bars[0])
	}
}

func TestRunsPageFilters(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	other, err := f.st.CreateRun(ctx, store.NewRun{Pipeline: "other<i>", Interval: "2024-01-02"})
	if err != nil {
		t.Fatal(err)
	}
	code, page := f.get(t, "/")
	if code != 200 || !strings.Contains(page, "demo/2024-01-01/r1") || !strings.Contains(page, "other&lt;i&gt;/2024-01-02/r1") {
		t.Fatalf("status %d\n%s", code, page)
	}
	clean(t, "runs", page)
	if !strings.Contains(page, "box pid 42") {
		t.Error("who ran it is missing")
	}
	_, page = f.get(t, "/?pipeline=demo")
	if strings.Contains(page, "other&lt;i&gt;/") {
		t.Error("pipeline filter kept another pipeline's run")
	}
	_, page = f.get(t, "/?state=running")
	if strings.Contains(page, "demo/2024-01-01/r1") || !strings.Contains(page, `href="/run?id=other%3ci%3e%2f2024-01-02%2fr1"`) {
		t.Errorf("state filter:\n%s", page)
	}
	// A running run's page refreshes itself; a finished one's does not.
	_, page = f.get(t, "/run?id="+url.QueryEscape(other.ID))
	if !strings.Contains(page, "/run/live?id=") {
		t.Error("a running run's page has no live refresh")
	}
	code, live := f.get(t, "/run/live?id="+url.QueryEscape(other.ID))
	if code != 200 || !strings.Contains(live, `"state":"running"`) {
		t.Errorf("live: %d %s", code, live)
	}
	_, page = f.get(t, "/run?id="+url.QueryEscape(f.run))
	if strings.Contains(page, "<script>") {
		t.Error("a finished run's page has a script")
	}
}

func TestArtifactPage(t *testing.T) {
	f := newFixture(t)
	code, page := f.get(t, "/artifact?pipeline=demo&name=part")
	if code != 200 {
		t.Fatalf("status %d\n%s", code, page)
	}
	clean(t, "artifact", page)
	for _, want := range []string{"part@2024-01-01#sha256:bbbb", "write#2", "part_ok (in demo/2024-01-01/r1)", "older accepted version", "part@2024-01-01#sha256:aaaa"} {
		if !strings.Contains(page, want) {
			t.Errorf("artifact page lacks %q", want)
		}
	}
	// The visible version is the one with the higher token.
	vis := page[strings.Index(page, "<dl class=\"facts lineage\">"):]
	if !strings.Contains(vis[:strings.Index(vis, "</dl>")], "sha256:bbbb") {
		t.Error("the visible version is not attempt 2's")
	}
}

func TestWorkersAndErrors(t *testing.T) {
	f := newFixture(t)
	code, page := f.get(t, "/workers")
	if code != 200 || !strings.Contains(page, "No workers registered") {
		t.Errorf("workers: %d\n%s", code, page)
	}
	code, page = f.get(t, "/run?id="+url.QueryEscape("nope/<x>"))
	if code != 404 || strings.Contains(page, "<x>") {
		t.Errorf("unknown run: %d\n%s", code, page)
	}
	srv := httptest.NewServer((&Server{Src: f.src}).Handler())
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/run?id=x", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

func TestReportSelfContained(t *testing.T) {
	f := newFixture(t)
	var b bytes.Buffer
	if err := Report(context.Background(), &b, f.src, "state.db", f.run); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	clean(t, "report", page)
	for _, bad := range []string{"<script", "<link", "src=\"http", "href=\"http", "href=\"/", "@import", "url(http"} {
		if strings.Contains(page, bad) {
			t.Errorf("report holds %q: it must need no network and no server", bad)
		}
	}
	if n := strings.Count(page, `<g class="bar `); n != 5 {
		t.Errorf("%d bars, want 5", n)
	}
}

// A 1,000-task run: loading and rendering it is what pipec ui does for a
// run page (the figure is in docs/ui.md).
func BenchmarkRunPage1000(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	run, err := st.CreateRun(ctx, store.NewRun{Pipeline: "big", Interval: "2024-01-01"})
	if err != nil {
		b.Fatal(err)
	}
	res := store.FenceResource("big", "2024-01-01")
	for i := 0; i < 1000; i++ {
		task := "t" + strconv.Itoa(i)
		for n := 1; n <= 1+i%3/2; n++ {
			a, err := st.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: task, Resource: res, Worker: "w"})
			if err != nil {
				b.Fatal(err)
			}
			state := store.AttemptSucceeded
			if n == 1 && i%3 == 2 {
				state = store.AttemptFailed
			}
			if err := st.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: state, ExitCode: 1}); err != nil {
				b.Fatal(err)
			}
		}
	}
	st.FinishRun(ctx, run.ID, store.RunSucceeded)
	// The plan's DAG: each task needs up to three of the 30 before it.
	plan := &compiler.Plan{Pipeline: "big"}
	for i := 0; i < 1000; i++ {
		pt := compiler.PlanTask{Name: "t" + strconv.Itoa(i)}
		for k := 1; k <= 3 && i > 0; k++ {
			pt.Needs = append(pt.Needs, "t"+strconv.Itoa(max(0, i-(i*7+k*13)%30-1)))
		}
		plan.Tasks = append(plan.Tasks, pt)
	}
	src := &Source{Store: st, Specs: []Spec{{Plan: plan}}}
	srv := (&Server{Src: src}).Handler()
	v, _ := src.LoadRun(ctx, run.ID)
	if len(v.Tasks) != 1000 {
		b.Fatalf("%d tasks", len(v.Tasks))
	}
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", "/run?id="+url.QueryEscape(run.ID), nil))
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}

// The live endpoint tells the page whether anything happened since the
// event it shows.
func TestLive(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r, err := f.st.CreateRun(ctx, store.NewRun{Pipeline: "live", Interval: "2024-01-01"})
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := f.st.Events(ctx, r.ID)
	last := evs[len(evs)-1].Seq
	_, page := f.get(t, "/run?id="+url.QueryEscape(r.ID))
	if !strings.Contains(page, fmt.Sprintf(`var url = "/run/live?id=live%%2F2024-01-01%%2Fr1\u0026seq=%d", seq =  %d ;`, last, last)) {
		t.Fatalf("no refresh script for seq %d:\n%s", last, page)
	}
	q := fmt.Sprintf("/run/live?id=%s&seq=%d", url.QueryEscape(r.ID), last)
	if _, b := f.get(t, q); b != fmt.Sprintf(`{"seq":%d,"state":"running"}`+"\n", last) {
		t.Errorf("nothing new: %s", b)
	}
	seq, err := f.st.AppendEvent(ctx, store.Event{Run: r.ID, Kind: "task.note"})
	if err != nil {
		t.Fatal(err)
	}
	if _, b := f.get(t, q); b != fmt.Sprintf(`{"seq":%d,"state":"running"}`+"\n", seq) {
		t.Errorf("after an event: %s", b)
	}
	f.st.FinishRun(ctx, r.ID, store.RunSucceeded)
	if _, b := f.get(t, q); !strings.Contains(b, `"state":"succeeded"`) {
		t.Errorf("after the end: %s", b)
	}
}

// The runs list of a state with 300 finished runs of 20 attempts each:
// the first request reads every listed run's log, later ones do not.
func BenchmarkRunsPage(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for i := 0; i < 300; i++ {
		run, err := st.CreateRun(ctx, store.NewRun{Pipeline: "p" + strconv.Itoa(i%3), Interval: fmt.Sprintf("2024-01-%02d", i%28+1),
			Owner: store.RunOwner{Host: "h", PID: i}, Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		for k := 0; k < 20; k++ {
			a, err := st.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: "t" + strconv.Itoa(k), Resource: "r" + run.ID})
			if err != nil {
				b.Fatal(err)
			}
			st.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptSucceeded})
		}
		st.FinishRun(ctx, run.ID, store.RunSucceeded)
	}
	srv := (&Server{Src: &Source{Store: st}}).Handler()
	get := func() {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
	start := time.Now()
	get()
	first := time.Since(start)
	b.ResetTimer()
	for b.Loop() {
		get()
	}
	b.ReportMetric(float64(first.Microseconds())/1000, "first-ms")
}

// A version rejected, then audited again by a later run (a check edited
// since) and accepted, shows each state in turn on its run's page: staged
// again once reopened, accepted at the end.
func TestReopenedVersion(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	run, err := f.st.CreateRun(ctx, store.NewRun{Pipeline: "demo", Interval: "2024-01-02", CodeVersion: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	f.run = run.ID
	a, err := f.st.StartAttempt(ctx, store.AttemptSpec{Run: f.run, Task: "charge", Resource: store.FenceResource("demo", "2024-01-02")})
	if err != nil {
		t.Fatal(err)
	}
	v, err := f.st.RecordVersion(ctx, store.Version{Artifact: "receipt", Interval: "2024-01-02", Digest: "sha256:cccc", Run: f.run, Task: "charge", Attempt: a.Number})
	if err != nil {
		t.Fatal(err)
	}
	state := func() string {
		t.Helper()
		rv, err := f.src.LoadRun(ctx, f.run)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range rv.Versions {
			if x.ID == v.ID {
				return x.State
			}
		}
		t.Fatalf("version %d is not on the run's page", v.ID)
		return ""
	}
	for _, step := range []struct {
		do   func() error
		want string
	}{
		{func() error { return f.st.RejectVersion(ctx, v.ID, "check receipt_ok failed") }, "rejected"},
		{func() error { return f.st.ReopenVersion(ctx, v.ID, "a check of receipt is new or edited since") }, "staged"},
		{func() error { return f.st.AcceptVersion(ctx, v.ID) }, "accepted"},
	} {
		if err := step.do(); err != nil {
			t.Fatal(err)
		}
		if got := state(); got != step.want {
			t.Fatalf("version %s, want %s", got, step.want)
		}
	}
}
