package compiler

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
)

// at gives each reference a distinct, readable position (line n) so tests can
// check where a finding points.
func at(line int) diag.Range {
	return diag.Range{Filename: "t.hcl", Start: diag.Pos{Line: line, Column: 1}, End: diag.Pos{Line: line, Column: 5}}
}

func ref(name string, line int) spec.Ref { return spec.Ref{Name: name, Range: at(line)} }

func task(name string, line int) spec.Task {
	return spec.Task{Named: spec.Named{Name: name, NameRange: at(line), Range: at(line)}, Command: []string{"true"}}
}

func messages(ds diag.Diagnostics) []string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%d %s %s", d.Range.Start.Line, d.Rule, d.Message))
	}
	return out
}

func TestCycleReportedOnceWithWholePath(t *testing.T) {
	a, b, c, d := task("a", 1), task("b", 2), task("c", 3), task("d", 4)
	a.DependsOn = []spec.Ref{ref("c", 10)}
	a.Outputs = []spec.Ref{ref("x", 11)}
	b.Inputs = []spec.Input{{Artifact: "x", Range: at(12)}}
	b.Outputs = []spec.Ref{ref("y", 13)}
	c.Inputs = []spec.Input{{Artifact: "y", Range: at(14)}}
	d.DependsOn = []spec.Ref{ref("d", 15)} // a self-loop is a cycle too
	p := &spec.Pipeline{Name: "p", Tasks: []spec.Task{c, b, a, d}}
	_, ds := Compile(p)
	want := []string{
		"12 cycle dependency cycle: a -> b -> c -> a", // at b's input of x, the edge leaving a
		"15 cycle dependency cycle: d -> d",
	}
	if diff := cmp.Diff(want, messages(ds)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}

func TestMissingReferencesAndNoCascade(t *testing.T) {
	ex, load, clean := task("extract", 1), task("load", 2), task("clean", 3)
	ex.Outputs = []spec.Ref{ref("raw_orders", 4)}
	load.DependsOn = []spec.Ref{ref("extrct", 5)}
	clean.Inputs = []spec.Input{{Artifact: "raw_order", Range: at(6)}}
	clean.Outputs = []spec.Ref{ref("raw_orders", 7)}
	p := &spec.Pipeline{Name: "p", Tasks: []spec.Task{ex, load, clean},
		Checks:    []spec.Check{{Named: spec.Named{Name: "ok"}, Input: ref("nothing", 8)}},
		Publishes: []spec.Publish{{Named: spec.Named{Name: "pub"}, Artifact: ref("raw_orders", 9), Sink: ref("wh", 10)}},
		Sinks:     []spec.Sink{{Named: spec.Named{Name: "warehouse"}, Type: "directory", Path: "w"}},
	}
	_, ds := Compile(p)
	want := []string{
		`5 missing-dependency task "load" depends on "extrct", which is not a task in this pipeline; did you mean "extract"?`,
		`6 missing-artifact task "clean" reads artifact "raw_order", which no task outputs; did you mean "raw_orders"?`,
		`7 duplicate-producer artifact "raw_orders" is already produced by task "extract": two writers of one artifact race each other; give each task its own output`,
		`8 missing-artifact check "ok" audits artifact "nothing", which no task outputs`,
		`10 schema publish "pub" names sink "wh", which is not defined`,
	}
	if diff := cmp.Diff(want, messages(ds)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}

func TestPlanOrderEdgesAndDefaults(t *testing.T) {
	ex, cl := task("extract", 1), task("clean", 2)
	ex.Outputs = []spec.Ref{ref("raw", 3)}
	ex.Retry = &spec.Ref{Name: "default"}
	cl.Inputs = []spec.Input{{Artifact: "raw", Range: at(4)}, {Artifact: "clean", Offset: -1, Range: at(5)}}
	cl.Outputs = []spec.Ref{ref("clean", 6)}
	pol := spec.RetryPolicy{Named: spec.Named{Name: "default"}, On: []spec.Ref{ref("transient", 7)}}
	p := &spec.Pipeline{Name: "p", Tasks: []spec.Task{cl, ex}, Retries: []spec.RetryPolicy{pol},
		Errors:    []spec.ErrorClass{{Named: spec.Named{Name: "transient"}, ExitCodes: []int{75}}},
		Checks:    []spec.Check{{Named: spec.Named{Name: "ok"}, Input: ref("clean", 8)}},
		Sinks:     []spec.Sink{{Named: spec.Named{Name: "wh"}, Type: "directory", Path: "w"}},
		Publishes: []spec.Publish{{Named: spec.Named{Name: "mart"}, Artifact: ref("clean", 9), Sink: ref("wh", 10)}},
	}
	res, ds := Compile(p)
	if len(ds) != 0 {
		t.Fatalf("unexpected findings: %v", ds)
	}
	wantOrder := []string{"task.extract", "task.clean", "check.ok", "publish.mart"}
	if diff := cmp.Diff(wantOrder, res.Plan.Order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	// The previous interval's "clean" is not an edge: clean does not wait for itself.
	if got := res.Plan.Tasks[0]; got.Name != "clean" || strings.Join(got.Needs, ",") != "extract" {
		t.Errorf("clean needs %v, want [extract]", got.Needs)
	}
	r := res.Plan.Tasks[1].Retry
	want := &PlanRetry{Policy: "default", MaxAttempts: DefaultMaxAttempts, Initial: "1s", Multiplier: 2, MaxDelay: "5m0s", Jitter: "full", On: []string{"transient"}}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("resolved retry (-want +got):\n%s", diff)
	}
	if res.Plan.Sinks[0].Fencing != "token" {
		t.Errorf("directory sink fencing defaults to %q, want token", res.Plan.Sinks[0].Fencing)
	}
	if res.Plan.Digest != Digest(res.Plan) || !strings.HasPrefix(res.Plan.Digest, "sha256:") {
		t.Errorf("digest %q does not match the plan", res.Plan.Digest)
	}
}

func TestUndefinedPolicyPoolAndClass(t *testing.T) {
	tk := task("t", 1)
	tk.Retry = &spec.Ref{Name: "defualt", Range: at(2)}
	tk.Pool = &spec.Ref{Name: "bulk", Range: at(3)}
	pol := spec.RetryPolicy{Named: spec.Named{Name: "default"}, On: []spec.Ref{ref("transent", 4), ref("timeout", 5)}}
	p := &spec.Pipeline{Name: "p", Tasks: []spec.Task{tk}, Retries: []spec.RetryPolicy{pol},
		Errors: []spec.ErrorClass{{Named: spec.Named{Name: "transient"}}}}
	_, ds := Compile(p)
	want := []string{
		`2 schema task "t" uses retry policy "defualt", which is not defined; did you mean "default"?`,
		`3 schema task "t" uses pool "bulk", which is not defined`,
		`4 schema retry policy "default" retries error class "transent", which is not defined (built-in classes: timeout, killed); did you mean "transient"?`,
	}
	if diff := cmp.Diff(want, messages(ds)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}

// chain builds n tasks where task i depends on up to three earlier ones, the
// shape of the benchmark DAG (internal/gendag), without parsing.
func chain(n int) *spec.Pipeline {
	p := &spec.Pipeline{Name: "big"}
	for i := range n {
		t := task(fmt.Sprintf("t%d", i), i+1)
		for _, d := range []int{i - 1, i / 2, i * 7 / 10} {
			if d >= 0 && d < i {
				t.DependsOn = append(t.DependsOn, ref(fmt.Sprintf("t%d", d), i+1))
			}
		}
		if i%10 == 0 {
			t.Outputs = []spec.Ref{ref(fmt.Sprintf("a%d", i), i+1)}
		}
		if i%10 == 5 {
			t.Inputs = []spec.Input{{Artifact: fmt.Sprintf("a%d", i-5), Range: at(i + 1)}}
		}
		p.Tasks = append(p.Tasks, t)
	}
	return p
}

func TestLargeGraphHasNoFindings(t *testing.T) {
	res, ds := Compile(chain(2000))
	if len(ds) != 0 {
		t.Fatalf("findings: %v", ds[:min(3, len(ds))])
	}
	if len(res.Plan.Order) != 2000 {
		t.Fatalf("order has %d nodes, want 2000", len(res.Plan.Order))
	}
}

func BenchmarkCompile(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		p := chain(n)
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ds := Compile(p); len(ds) != 0 {
					b.Fatal(ds[0])
				}
			}
		})
	}
}

// TestLabelsSortedAndDeduplicated: a task's labels reach the plan sorted and
// once each, and a task without labels has none (the field is left out of
// the plan's JSON, so plans written before labels existed do not change).
func TestLabelsSortedAndDeduplicated(t *testing.T) {
	a, b := task("a", 1), task("b", 2)
	a.Labels = []spec.Ref{ref("spark", 3), ref("gpu", 4), ref("spark", 5)}
	res, ds := Compile(&spec.Pipeline{Name: "p", Tasks: []spec.Task{a, b}})
	if len(ds) > 0 {
		t.Fatalf("findings: %v", messages(ds))
	}
	if got := res.Plan.Tasks[0].Labels; !slices.Equal(got, []string{"gpu", "spark"}) {
		t.Errorf("a's labels = %q, want [gpu spark]", got)
	}
	if got := res.Plan.Tasks[1].Labels; got != nil {
		t.Errorf("b's labels = %q, want none", got)
	}
	if strings.Count(string(res.Plan.Marshal()), `"labels"`) != 1 {
		t.Errorf("the plan's JSON should name labels once (a's only):\n%s", res.Plan.Marshal())
	}
}

// TestTaskDigest: what a task does changes its digest (command,
// environment, secrets' names, inputs and their intervals, outputs,
// effects, idempotence); when or where it runs does not (timeout, retry,
// pool, labels, heartbeat, dependencies without data).
func TestTaskDigest(t *testing.T) {
	base := func() PlanTask {
		return PlanTask{Name: "t", Command: []string{"sh", "-c", "x"}, Env: map[string]string{"A": "1"},
			SecretEnv: []string{"S"}, Inputs: []PlanInput{{Artifact: "raw", Offset: 0, Producer: "p"}},
			Outputs: []string{"out"}, Effects: []string{"mail"}, Idempotent: true}
	}
	b := base()
	want := TaskDigest(&b)
	if len(want) != 16 {
		t.Fatalf("digest %q, want 16 hex digits", want)
	}
	for what, edit := range map[string]func(*PlanTask){
		"command":       func(t *PlanTask) { t.Command = []string{"sh", "-c", "y"} },
		"command split": func(t *PlanTask) { t.Command = []string{"sh", "-c x"} },
		"env value":     func(t *PlanTask) { t.Env["A"] = "2" },
		"env key":       func(t *PlanTask) { t.Env = map[string]string{"B": "1"} },
		"secret":        func(t *PlanTask) { t.SecretEnv = []string{"T"} },
		"input offset":  func(t *PlanTask) { t.Inputs[0].Offset = -1 },
		"input":         func(t *PlanTask) { t.Inputs[0].Artifact = "other" },
		"output":        func(t *PlanTask) { t.Outputs = []string{"out", "more"} },
		"effects":       func(t *PlanTask) { t.Effects = nil },
		"idempotent":    func(t *PlanTask) { t.Idempotent = false },
	} {
		e := base()
		edit(&e)
		if TaskDigest(&e) == want {
			t.Errorf("%s changed, the digest did not", what)
		}
	}
	for what, edit := range map[string]func(*PlanTask){
		"timeout":    func(t *PlanTask) { t.Timeout = "2m" },
		"retry":      func(t *PlanTask) { t.Retry = &PlanRetry{MaxAttempts: 3} },
		"pool":       func(t *PlanTask) { t.Pool = "p" },
		"labels":     func(t *PlanTask) { t.Labels = []string{"gpu"} },
		"depends_on": func(t *PlanTask) { t.DependsOn, t.Needs = []string{"a"}, []string{"a", "p"} },
		"producer":   func(t *PlanTask) { t.Inputs[0].Producer = "q" },
	} {
		e := base()
		edit(&e)
		if TaskDigest(&e) != want {
			t.Errorf("%s changed the digest", what)
		}
	}
}

// TestDefinitionEdit: a task's recorded definition against the spec's now
// (Plan.TaskDigests): the task edited, a check of its outputs new or
// edited, or alike (a check removed, a record from before checks were
// digested).
func TestDefinitionEdit(t *testing.T) {
	for _, c := range []struct{ recorded, now, want string }{
		{"aaaa/c1,c2", "aaaa/c1,c2", ""},
		{"aaaa/c1,c2", "bbbb/c1,c2", EditedTask},
		{"", "aaaa/", EditedTask},
		{"aaaa/c1", "aaaa/c1,c2", EditedChecks},
		{"aaaa/", "aaaa/c1", EditedChecks},
		{"aaaa/c1,c2", "aaaa/c3", EditedChecks},
		{"aaaa/c1,c2", "aaaa/c2", ""},
		{"aaaa/c1", "aaaa/", ""},
		{"aaaa", "aaaa/c1", ""},
		{"aaaa", "bbbb/c1", EditedTask},
	} {
		if got := DefinitionEdit(c.recorded, c.now); got != c.want {
			t.Errorf("DefinitionEdit(%q, %q) = %q, want %q", c.recorded, c.now, got, c.want)
		}
	}
}

// TestTaskDigestsCoverChecks: a check of a task's outputs is part of its
// recorded definition, and of no other task's; its every assertion counts.
func TestTaskDigestsCoverChecks(t *testing.T) {
	min := 1
	plan := func(edit func(*PlanCheck)) map[string]string {
		c := PlanCheck{Name: "raw_ok", Input: "raw", RowCountMin: &min}
		if edit != nil {
			edit(&c)
		}
		p := &Plan{Tasks: []PlanTask{{Name: "extract", Outputs: []string{"raw"}}, {Name: "other", Outputs: []string{"x"}}},
			Checks: []PlanCheck{c}}
		return p.TaskDigests()
	}
	base := plan(nil)
	for what, edit := range map[string]func(*PlanCheck){
		"unique":   func(c *PlanCheck) { c.Unique = []string{"id"} },
		"not_null": func(c *PlanCheck) { c.NotNull = []string{"id"} },
		"minimum":  func(c *PlanCheck) { two := 2; c.RowCountMin = &two },
		"command":  func(c *PlanCheck) { c.Command = []string{"./check.sh"} },
	} {
		now := plan(edit)
		if DefinitionEdit(base["extract"], now["extract"]) != EditedChecks {
			t.Errorf("%s: extract %q against %q is not a checks edit", what, base["extract"], now["extract"])
		}
		if now["other"] != base["other"] {
			t.Errorf("%s changed the definition of a task that does not make raw", what)
		}
	}
	if d := base["other"]; !strings.HasSuffix(d, "/") || len(d) != 17 {
		t.Errorf("a task without checks is recorded as %q, want its digest and a bare /", d)
	}
}
