package cuespec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/parser"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/golden"
	"github.com/pipec/pipec/spec"
)

// cueDiagLines renders diagnostics one per line, as pipec lint prints them.
func cueDiagLines(ds diag.Diagnostics) []byte {
	var b strings.Builder
	for _, d := range ds.Sort() {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

func cueSpecFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "cue", dir, "*.cue"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no spec files in testdata/cue/%s: %v", dir, err)
	}
	return files
}

// cueDump writes the model as indented JSON, each range folded to
// "line:col-line:col" (the file name is the spec's, so it is left out).
func cueDump(t *testing.T, p *spec.Pipeline) []byte {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(cueFoldRanges(v), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

func cueFoldRanges(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if s, ok := x["start"].(map[string]any); ok {
			if e, ok := x["end"].(map[string]any); ok {
				return fmt.Sprintf("%v:%v-%v:%v", s["line"], s["column"], e["line"], e["column"])
			}
		}
		for k, e := range x {
			x[k] = cueFoldRanges(e)
		}
	case []any:
		for i, e := range x {
			x[i] = cueFoldRanges(e)
		}
	}
	return v
}

// TestLoadCUEValid loads every valid spec: no diagnostic, and the model as
// a JSON dump equal to its golden file.
func TestLoadCUEValid(t *testing.T) {
	for _, file := range cueSpecFiles(t, "ok") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			p, ds := LoadCUE(file, src)
			if len(ds) > 0 {
				t.Fatalf("unexpected diagnostics:\n%s", cueDiagLines(ds))
			}
			if p == nil {
				t.Fatal("no pipeline")
			}
			golden.Check(t, strings.TrimSuffix(file, ".cue")+".json", cueDump(t, p))
		})
	}
}

// TestLoadCUEErrors loads every broken spec and compares its diagnostics with
// the golden .out file.
func TestLoadCUEErrors(t *testing.T) {
	for _, file := range cueSpecFiles(t, "err") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			_, ds := LoadCUE(file, src)
			if !ds.HasErrors() {
				t.Fatalf("no error reported")
			}
			for _, d := range ds {
				if d.Range.Filename != file || d.Range.Start.Line < 1 || d.Range.Start.Column < 1 {
					t.Errorf("diagnostic not placed in the file: %v", d)
				}
			}
			golden.Check(t, strings.TrimSuffix(file, ".cue")+".out", cueDiagLines(ds))
		})
	}
}

// TestLoadCUEReadsEveryField loads a spec that writes every field of
// spec.Fields and checks the loader recorded each one: a field added to the
// table (and to pipeline.cue, see schema's test) but not read by the loader
// fails here.
func TestLoadCUEReadsEveryField(t *testing.T) {
	file := filepath.Join("testdata", "cue", "ok", "orders.cue")
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, ds := LoadCUE(file, src)
	if len(ds) > 0 || p == nil {
		t.Fatalf("load failed:\n%s", cueDiagLines(ds))
	}
	seen := map[string]map[string]bool{}
	add := func(kind string, a spec.Attrs) {
		if seen[kind] == nil {
			seen[kind] = map[string]bool{}
		}
		for name := range a.Ranges {
			if !strings.Contains(name, ".") {
				seen[kind][name] = true
			}
		}
	}
	add(spec.KindPipeline, p.Attrs)
	if p.Schedule != nil {
		add(spec.KindSchedule, p.Schedule.Attrs)
	}
	if p.RetryBudget != nil {
		add(spec.KindRetryBudget, p.RetryBudget.Attrs)
	}
	for _, x := range p.Pools {
		add(spec.KindPool, x.Attrs)
	}
	for _, x := range p.Errors {
		add(spec.KindError, x.Attrs)
	}
	for _, x := range p.Retries {
		add(spec.KindRetry, x.Attrs)
	}
	for _, x := range p.Tasks {
		add(spec.KindTask, x.Attrs)
		if x.Heartbeat != nil {
			add(spec.KindHeartbeat, x.Heartbeat.Attrs)
		}
		if x.Failover != nil {
			add(spec.KindFailover, x.Failover.Attrs)
		}
	}
	for _, x := range p.Checks {
		add(spec.KindCheck, x.Attrs)
	}
	for _, x := range p.Sinks {
		add(spec.KindSink, x.Attrs)
	}
	for _, x := range p.Publishes {
		add(spec.KindPublish, x.Attrs)
	}
	// Named elements are recorded as elements, not as attributes.
	if len(p.Pools) > 0 {
		seen[spec.KindPipeline][spec.KindPool] = true
	}
	for _, k := range []struct {
		kind string
		n    int
	}{{spec.KindError, len(p.Errors)}, {spec.KindRetry, len(p.Retries)}, {spec.KindTask, len(p.Tasks)}, {spec.KindCheck, len(p.Checks)}, {spec.KindSink, len(p.Sinks)}, {spec.KindPublish, len(p.Publishes)}} {
		if k.n > 0 {
			seen[spec.KindPipeline][k.kind] = true
		}
	}
	for kind, fields := range spec.Fields() {
		for _, f := range fields {
			if !seen[kind][f.Name] {
				t.Errorf("%s.%s is in spec.Fields but was not read from %s", kind, f.Name, file)
			}
			delete(seen[kind], f.Name)
		}
		for name := range seen[kind] {
			t.Errorf("%s.%s was read but is not in spec.Fields", kind, name)
		}
	}
}

// TestLoadCUEChunked checks that evaluating a big spec in concurrent chunks
// gives exactly the model and the findings of evaluating it whole.
func TestLoadCUEChunked(t *testing.T) {
	src := string(cueGenSpec(3000))
	// Break a few tasks in each chunk, and the pipeline itself.
	for _, bad := range []string{"t5", "t1500", "t2999"} {
		src = strings.Replace(src, "task: "+bad+": {command: [\"true\"], timeout: \"1m\"", "task: "+bad+": {command: [\"true\"], timeout: 5, idempotnt: true", 1)
	}
	src = strings.Replace(src, "code_version: \"1\"", "code_version: 1", 1)
	load := func(chunk, procs int) (*spec.Pipeline, diag.Diagnostics) {
		l := &cueLoader{file: "big.cue", src: []byte(src), chunkSize: chunk, procs: procs}
		return l.load(), l.ds.Sort()
	}
	whole, wds := load(-1, 1)
	chunked, cds := load(700, 3)
	if got, want := cueDiagLines(cds), cueDiagLines(wds); !bytes.Equal(got, want) {
		t.Errorf("chunked findings differ\n--- chunked\n%s--- whole\n%s", got, want)
	}
	if len(wds) != 7 {
		t.Errorf("want 7 findings (3 types, 3 unknown fields, 1 code_version), got:\n%s", cueDiagLines(wds))
	}
	if len(whole.Tasks) != 3000 || len(chunked.Tasks) != 3000 {
		t.Fatalf("tasks: whole %d, chunked %d", len(whole.Tasks), len(chunked.Tasks))
	}
	if !reflect.DeepEqual(whole, chunked) {
		t.Error("chunked model differs from the whole one")
	}
}

// TestSplitPlain checks the chunks themselves: the elements are shared out
// in order, and the first chunk keeps everything else.
func TestSplitPlain(t *testing.T) {
	src := cueGenSpec(2500)
	f, err := parser.ParseFile("x.cue", src)
	if err != nil {
		t.Fatal(err)
	}
	merged := mergeFile(f)
	if got := splitPlain(merged, 2500); len(got) != 1 || got[0] != merged {
		t.Errorf("2500 tasks in chunks of 2500: want the file whole")
	}
	chunks := splitPlain(merged, 1000)
	if len(chunks) != 3 {
		t.Fatalf("2500 tasks in chunks of 1000: want 3 chunks, got %d", len(chunks))
	}
	var names []string
	for i, c := range chunks {
		out, err := format.Node(c)
		if err != nil {
			t.Fatal(err)
		}
		v := cuecontext.New().CompileBytes(out)
		if err := v.Err(); err != nil {
			t.Fatalf("chunk %d does not compile: %v", i, err)
		}
		it, err := v.LookupPath(cue.ParsePath("pipeline.bench.task")).Fields()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for it.Next() {
			names = append(names, it.Selector().Unquoted())
			n++
		}
		if want := min(1000, 2500-1000*i); n != want {
			t.Errorf("chunk %d: %d tasks, want %d", i, n, want)
		}
		hasRest := v.LookupPath(cue.ParsePath("pipeline.bench.retry")).Exists()
		if hasRest != (i == 0) {
			t.Errorf("chunk %d: holds the rest of the pipeline: %v", i, hasRest)
		}
	}
	if len(names) != 2500 || names[0] != "t0" || names[1250] != "t1250" || names[2499] != "t2499" {
		t.Errorf("tasks not shared out in order: %d, %v", len(names), names[:3])
	}
}

// TestLoadCUEMatchesHCL loads the CUE and HCL forms of one pipeline and
// requires the same model, ranges aside: the compiler must not be able to
// tell which syntax a spec was written in.
func TestLoadCUEMatchesHCL(t *testing.T) {
	for _, pair := range []struct{ hcl, cue string }{
		{"../testdata/hcl/ok/full.hcl", "testdata/cue/ok/full.cue"},
		{"../../examples/orders/pipeline.hcl", "../../examples/orders/pipeline.cue"},
	} {
		t.Run(pair.cue, func(t *testing.T) {
			hp, _, hds, herr := spec.LoadFile(pair.hcl)
			cp, cds, cerr := loadFile(pair.cue)
			if herr != nil || cerr != nil {
				t.Skipf("missing file: %v %v", herr, cerr)
			}
			if len(hds) > 0 || len(cds) > 0 {
				t.Fatalf("findings:\n%s%s", cueDiagLines(hds), cueDiagLines(cds))
			}
			opts := []cmp.Option{
				cmpopts.IgnoreTypes(diag.Range{}),
				cmpopts.IgnoreFields(spec.Pipeline{}, "File"),
				// Which attributes were written must agree; where is syntax.
				cmp.Transformer("attrNames", func(a spec.Attrs) []string {
					return slices.Sorted(maps.Keys(a.Ranges))
				}),
			}
			if d := cmp.Diff(hp, cp, opts...); d != "" {
				t.Errorf("the HCL and CUE models differ (-hcl +cue):\n%s", d)
			}
		})
	}
}

// TestLoadCUERanges pins the range conventions shared with the HCL loader:
// an element's NameRange and Range are its label; an attribute's range runs
// from its label to the end of its value; env entries are "env.KEY"; every
// reference and input has its own range; nested elements have their own.
func TestLoadCUERanges(t *testing.T) {
	src := "pipeline: p: {\n" +
		"\ttask: extract: {\n" +
		"\t\tcommand: [\"x\"]\n" +
		"\t\tinputs: [\"raw\", \"raw@-1\"]\n" +
		"\t\tenv: {MODE: \"é\", B: \"2\"}\n" +
		"\t\tretry: \"default\"\n" +
		"\t\theartbeat: {every: \"1s\", lease: \"5s\"}\n" +
		"\t}\n" +
		"}\n"
	p, ds := LoadCUE("r.cue", []byte(src))
	if len(ds) > 0 || p == nil || len(p.Tasks) != 1 {
		t.Fatalf("load failed:\n%s", cueDiagLines(ds))
	}
	at := func(r diag.Range) string {
		return fmt.Sprintf("%d:%d-%d:%d", r.Start.Line, r.Start.Column, r.End.Line, r.End.Column)
	}
	task := p.Tasks[0]
	for _, c := range []struct {
		what string
		got  diag.Range
		want string
	}{
		{"pipeline name", p.NameRange, "1:11-1:12"},
		{"task name", task.NameRange, "2:8-2:15"},
		{"task range", task.Range, "2:8-2:15"},
		{"command", task.Attrs.At("command", diag.Range{}), "3:3-3:17"},
		{"input 0", task.Inputs[0].Range, "4:12-4:17"},
		{"input 1", task.Inputs[1].Range, "4:19-4:27"},
		{"env", task.Attrs.At("env", diag.Range{}), "5:3-5:27"},
		{"env.MODE", task.Attrs.At("env.MODE", diag.Range{}), "5:9-5:18"},
		{"env.B", task.Attrs.At("env.B", diag.Range{}), "5:20-5:26"},
		{"retry attribute", task.Attrs.At("retry", diag.Range{}), "6:3-6:19"},
		{"retry reference", task.Retry.Range, "6:10-6:19"},
		{"heartbeat", task.Heartbeat.Range, "7:3-7:12"},
		{"heartbeat.lease", task.Heartbeat.Attrs.At("lease", diag.Range{}), "7:28-7:39"},
	} {
		if got := at(c.got); got != c.want || c.got.Filename != "r.cue" {
			t.Errorf("%s: range %s in %q, want %s", c.what, got, c.got.Filename, c.want)
		}
	}
}

// TestLoadCUEPlainMatchesEvaluated reads every spec both ways the loader
// can: from the syntax tree (plain data) and from the evaluated value (any
// CUE). The models must agree, ranges aside, and the findings must be at the
// same places.
func TestLoadCUEPlainMatchesEvaluated(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "cue", "*", "*.cue"))
	if err != nil || len(files) == 0 {
		t.Fatal("no specs")
	}
	opts := []cmp.Option{
		cmpopts.IgnoreTypes(diag.Range{}),
		cmp.Transformer("attrNames", func(a spec.Attrs) []string { return slices.Sorted(maps.Keys(a.Ranges)) }),
	}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		plain := &cueLoader{file: file, src: src}
		evaluated := &cueLoader{file: file, src: src, evaluateAll: true}
		pp, ep := plain.load(), evaluated.load()
		// The same places, with the same rules; messages may be worded
		// differently (CUE's own for a misplaced top-level field).
		places := func(ds diag.Diagnostics) string {
			var b strings.Builder
			for _, d := range ds.Sort() {
				fmt.Fprintf(&b, "%s [%s]\n", d.Range, d.Rule)
			}
			return b.String()
		}
		if a, b := places(plain.ds), places(evaluated.ds); a != b {
			t.Errorf("%s: findings read plain:\n%s\nevaluated:\n%s", file, cueDiagLines(plain.ds), cueDiagLines(evaluated.ds))
		}
		if plain.ds.HasErrors() {
			continue
		}
		if d := cmp.Diff(pp, ep, opts...); d != "" {
			t.Errorf("%s: models differ (-plain +evaluated):\n%s", file, d)
		}
	}
}

// loadFile reads and loads one CUE spec, as specload.LoadFile does.
func loadFile(path string) (*spec.Pipeline, diag.Diagnostics, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	p, ds := LoadCUE(path, src)
	if p != nil {
		p.File = path
	}
	return p, ds.Sort(), nil
}
