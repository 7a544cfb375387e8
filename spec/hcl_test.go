package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/hcl/v2"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/golden"
)

// diagLines renders diagnostics as `file:line:col: severity: message [rule]`.
func diagLines(ds diag.Diagnostics) []byte {
	var b bytes.Buffer
	for _, d := range ds {
		fmt.Fprintln(&b, d.String())
	}
	return b.Bytes()
}

func specFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "hcl", dir, "*.hcl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no specs in testdata/hcl/%s: %v", dir, err)
	}
	return files
}

// TestLoadHCLValid loads every valid spec: no finding, and the model dumped as
// JSON matches its golden file.
func TestLoadHCLValid(t *testing.T) {
	for _, path := range specFiles(t, "ok") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			p, ds := LoadHCL(filepath.Base(path), src)
			if len(ds) > 0 {
				t.Fatalf("unexpected findings:\n%s", diagLines(ds))
			}
			if p == nil {
				t.Fatal("nil pipeline")
			}
			golden.Check(t, strings.TrimSuffix(path, ".hcl")+".json", dumpModel(t, p))
		})
	}
}

// dumpModel renders a pipeline as indented JSON (keys sorted by encoding/json),
// with each range folded into one "file:line:col-line:col" string so that the
// golden file stays readable.
func dumpModel(t *testing.T, p *Pipeline) []byte {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(foldRanges(v), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

func foldRanges(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if start, ok := x["start"].(map[string]any); ok && len(x) == 3 {
			end, _ := x["end"].(map[string]any)
			return fmt.Sprintf("%v:%v:%v-%v:%v", x["file"], start["line"], start["column"], end["line"], end["column"])
		}
		for k, e := range x {
			x[k] = foldRanges(e)
		}
	case []any:
		for i, e := range x {
			x[i] = foldRanges(e)
		}
	}
	return v
}

// TestLoadHCLBroken loads every broken spec: its findings match the golden
// .out file, and each has a file, a line, and an error among them.
func TestLoadHCLBroken(t *testing.T) {
	for _, path := range specFiles(t, "err") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, ds := LoadHCL(filepath.Base(path), src)
			if !ds.HasErrors() {
				t.Fatalf("no error reported")
			}
			checkDiagShape(t, ds)
			golden.Check(t, strings.TrimSuffix(path, ".hcl")+".out", diagLines(ds))
		})
	}
}

// checkDiagShape asserts what every finding must have: a file, a line, a
// rule of the loader, and a one-line message.
func checkDiagShape(t *testing.T, ds diag.Diagnostics) {
	t.Helper()
	for _, d := range ds {
		if d.Range.Filename == "" || d.Range.Start.Line < 1 || d.Range.Start.Column < 1 {
			t.Errorf("finding without a position: %#v", d)
		}
		if d.Rule != RuleSyntax && d.Rule != RuleSchema {
			t.Errorf("finding with rule %q: %s", d.Rule, d)
		}
		if d.Message == "" || strings.ContainsAny(d.Message, "\n\r") {
			t.Errorf("message not one readable line: %q", d.Message)
		}
	}
}

// TestLoadHCLChunked checks that cutting a pipeline body into pieces parsed
// concurrently gives exactly what the one-piece parse gives, down to every
// range and finding. A chunk size of 1 cuts at every item boundary.
func TestLoadHCLChunked(t *testing.T) {
	files := append(specFiles(t, "ok"), specFiles(t, "err")...)
	srcs := map[string][]byte{"gen.hcl": genHCL(300)}
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		srcs[filepath.Base(path)] = src
	}
	for name, src := range srcs {
		t.Run(name, func(t *testing.T) {
			wantP, wantDs := loadWhole(name, src)
			for _, size := range []int{1, 7, 100, 4096} {
				p, ds := loadHCL(name, src, size)
				if diff := cmp.Diff(wantP, p); diff != "" {
					t.Errorf("chunk size %d: model differs (-whole +chunked):\n%s", size, diff)
				}
				if diff := cmp.Diff(wantDs, ds); diff != "" {
					t.Errorf("chunk size %d: findings differ (-whole +chunked):\n%s", size, diff)
				}
			}
		})
	}
}

// TestLayoutCountsTasks checks that the layout finds every task block of a
// plain spec, so its pieces' tasks are decoded in place (see taskWindow), and
// that a miscount still loads the same pipeline.
func TestLayoutCountsTasks(t *testing.T) {
	src := genHCL(300)
	lay, ok := layoutHCL(src, 4096)
	if !ok || taskCount(lay.pieces) != 300 {
		t.Fatalf("layout found %d tasks in 300 (ok %v)", taskCount(lay.pieces), ok)
	}
	want, wantDs := loadWhole("gen.hcl", src)
	lay.pieces[1].tasks++ // a task the decoder will not find
	p, ds, ok := loadChunked("gen.hcl", src, lay)
	if !ok {
		t.Fatal("the chunked load gave up")
	}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("model differs after a miscount (-whole +chunked):\n%s", diff)
	}
	if diff := cmp.Diff(wantDs, ds.Sort()); diff != "" {
		t.Errorf("findings differ after a miscount:\n%s", diff)
	}
	for line, want := range map[string]bool{
		`  task "a" `: true, "\ttask\t\"a\" ": true, `task"a"`: true,
		`  tasks "a" `: false, `  retry "task" `: false, `  task `[:6]: false,
	} {
		if got := opensTask([]byte(line)); got != want {
			t.Errorf("opensTask(%q) = %v", line, got)
		}
	}
}

// TestLayoutHCL checks where the scanner cuts, and that it refuses what it does
// not understand.
func TestLayoutHCL(t *testing.T) {
	src := "# c {\npipeline \"p\" { # open\n  a = \"}\\\"${ {x=1}[\"x\"] }\"\n  /* { */\n  b {\n    c = [\n 1]\n  }\n}\n// end\n"
	lay, ok := layoutHCL([]byte(src), 1)
	if !ok {
		t.Fatal("layout refused a file it should cut")
	}
	var got []string
	for _, pc := range lay.pieces {
		got = append(got, fmt.Sprintf("%d:%q", pc.line, src[pc.start:pc.end]))
	}
	want := []string{
		`3:"  a = \"}\\\"${ {x=1}[\"x\"] }\"\n"`,
		`4:"  /* { */\n"`,
		`5:"  b {\n    c = [\n 1]\n  }\n"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pieces (-want +got):\n%s", diff)
	}
	if h := string(lay.header); h != "# c {\npipeline \"p\" { # open\n}\n" {
		t.Errorf("header = %q", h)
	}
	for _, bad := range []string{
		"pipeline \"p\" { a = 1 }\n",                          // single line
		"pipeline \"p\" {\n  a = <<EOT\n}\nEOT\n}\n",          // heredoc
		"pipeline \"p\" {\n  a = 1\n}\npipeline \"q\" {\n}\n", // two blocks
		"pipeline \"p\" {\n  a = 1\n  b = 2 }\n",              // brace after an item
		"pipeline \"p\" {\n  a = \"x\n\"\n}\n",                // newline in a string
		"pipeline \"p\" {\n  a = 1\n  b = 2\n",                // unclosed
		"pipeline \"p\" {\n  a = 1\n  b = 2\n}}\n",            // unbalanced
		"pipeline \"p\" {\n  a = 1\n  b = 2\n)\n",             // closed by a parenthesis
	} {
		if _, ok := layoutHCL([]byte(bad), 1); ok {
			t.Errorf("layout accepted %q", bad)
		}
	}
}

// TestLoadHCLRanges pins the ranges the linter points at.
func TestLoadHCLRanges(t *testing.T) {
	src, err := os.ReadFile("testdata/hcl/ok/full.hcl")
	if err != nil {
		t.Fatal(err)
	}
	p, ds := LoadHCL("full.hcl", src)
	if len(ds) > 0 {
		t.Fatalf("unexpected findings:\n%s", diagLines(ds))
	}
	lines := strings.Split(string(src), "\n")
	// text returns the source a single-line range covers.
	text := func(r diag.Range) string {
		t.Helper()
		if r.Filename != "full.hcl" || r.Start.Line != r.End.Line || r.Start.Line < 1 {
			t.Fatalf("range %+v is not on one line of full.hcl", r)
		}
		if got, want := r.End.Byte-r.Start.Byte, r.End.Column-r.Start.Column; got != want {
			t.Fatalf("range %+v: byte and column widths differ on ASCII text", r)
		}
		return lines[r.Start.Line-1][r.Start.Column-1 : r.End.Column-1]
	}
	if got := string(src[p.NameRange.Start.Byte:p.NameRange.End.Byte]); got != `"full"` {
		t.Errorf("pipeline NameRange covers %q", got)
	}
	load := p.Tasks[1]
	tests := []struct {
		name string
		r    diag.Range
		want string
	}{
		{"pipeline range", p.Range, `pipeline "full"`},
		{"code_version", p.Attrs.At("code_version", diag.Range{}), `code_version = "2024.06.1"`},
		{"budget range", p.RetryBudget.Range, `retry_budget`},
		{"budget ratio", p.RetryBudget.Attrs.At("ratio", diag.Range{}), `ratio = 0.2`},
		{"task range", load.Range, `task "load"`},
		{"task name", load.NameRange, `"load"`},
		{"retry attr", load.Attrs.At("retry", diag.Range{}), `retry      = "fast"`},
		{"retry ref", load.Retry.Range, `"fast"`},
		{"pool ref", load.Pool.Range, `"backfill"`},
		{"env", load.Attrs.At("env", diag.Range{}), `env        = { MODE = "full", "LEVEL" = "3" }`},
		{"env.MODE", load.Attrs.At("env.MODE", diag.Range{}), `MODE = "full"`},
		{"env.LEVEL", load.Attrs.At("env.LEVEL", diag.Range{}), `"LEVEL" = "3"`},
		{"input 0", load.Inputs[0].Range, `"raw_orders"`},
		{"input 1", load.Inputs[1].Range, `"raw_orders@-1"`},
		{"depends_on", load.DependsOn[0].Range, `"extract"`},
		{"secret_env", load.SecretEnv[0].Range, `"WAREHOUSE_PASSWORD"`},
		{"effects", load.Effects[0].Range, `"notify"`},
		{"idempotent", load.Attrs.At("idempotent", diag.Range{}), `idempotent = false`},
		{"failover", load.Failover.Range, `failover`},
		{"failover on the task", load.Attrs.At("failover", diag.Range{}), `failover`},
		{"retry_budget on the pipeline", p.Attrs.At("retry_budget", diag.Range{}), `retry_budget`},
		{"failover.global", load.Failover.Attrs.At("global", diag.Range{}), `global     = 3`},
		{"check input", p.Checks[0].Input.Range, `"raw_orders"`},
		{"publish sink", p.Publishes[0].Sink.Range, `"lake"`},
		{"on attr", p.Retries[0].Attrs.At("on", diag.Range{}), `on           = []`},
	}
	for _, tt := range tests {
		if got := text(tt.r); got != tt.want {
			t.Errorf("%s covers %q, want %q", tt.name, got, tt.want)
		}
	}
	if load.Idempotent == nil || *load.Idempotent {
		t.Errorf("load.Idempotent = %v, want false", load.Idempotent)
	}
	if p.Tasks[0].Idempotent != nil || p.Tasks[0].Retry != nil || p.Tasks[0].Heartbeat != nil {
		t.Errorf("unwritten task fields are set: %+v", p.Tasks[0])
	}
	if p.Sinks[0].Fencing != "" || p.Schedule.MaxActiveRuns != 0 || p.Checks[0].RowCountMin == nil || *p.Checks[0].RowCountMin != 0 {
		t.Errorf("unwritten or zero values decoded wrongly: sink %+v, schedule %+v", p.Sinks[0], p.Schedule)
	}
	if want := time.Date(2024, 3, 1, 4, 0, 0, 0, time.UTC); !p.Schedule.Start.Equal(want) || p.Schedule.Start.Location() != time.UTC {
		t.Errorf("schedule start = %v, want %v in UTC", p.Schedule.Start, want)
	}
	if p.Retries[0].On != nil || !p.Retries[0].Attrs.Has("on") {
		t.Errorf("on = [] should be written but empty: %+v", p.Retries[0].On)
	}
}

// TestLoadHCLMessages pins findings that matter to authors, one spec each.
func TestLoadHCLMessages(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
	}{
		{"reference", "pipeline \"p\" {\n  code_version = var.x\n}\n",
			[]string{`t.hcl:2:18: error: Only literal values are allowed: "code_version" refers to "var.x"; a pipec spec holds plain strings, numbers, bools, lists and maps, with no variables [schema]`}},
		{"duplicate names the first", "pipeline \"p\" {\n  pool \"a\" { slots = 1 }\n  pool \"a\" { slots = 2 }\n}\n",
			[]string{`t.hcl:3:8: error: Duplicate pool block: a pool named "a" was already declared at t.hcl:2:3; names must be unique [schema]`}},
		{"enum lists values", "pipeline \"p\" {\n  sink \"s\" {\n    type = \"d\"\n    path = \"p\"\n    fencing = \"x\"\n  }\n}\n",
			[]string{`t.hcl:5:15: error: Invalid value for "fencing": "x" is not allowed; use one of "token", "none" [schema]`}},
		{"missing required", "pipeline \"p\" {\n  task \"a\" {\n  }\n}\n",
			[]string{`t.hcl:2:12: error: Missing required argument: The argument "command" is required, but no definition was found. [schema]`}},
		{"syntax only", "pipeline \"p\" {\n  task \"a\" {\n    command = [\n  }\n  bogus = 1\n}\n",
			nil},
		{"no pipeline", "# nothing\n",
			[]string{`t.hcl:1:1: error: Missing pipeline block: a spec file must hold one pipeline "NAME" { ... } block [schema]`}},
		{"crlf", "pipeline \"p\" {\r\n  task \"a\" {\r\n    command = [\"x\"]\r\n    timeout = \"1\"\r\n  }\r\n}\r\n",
			[]string{`t.hcl:4:15: error: timeout: invalid duration "1": write a number with a unit, such as "30s", "10m" or "24h" [schema]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ds := LoadHCL("t.hcl", []byte(tt.src))
			checkDiagShape(t, ds)
			got := strings.Split(strings.TrimSpace(string(diagLines(ds))), "\n")
			if tt.want == nil {
				// Only syntax findings: the parser's recovery makes schema
				// findings after it unreliable.
				for _, d := range ds {
					if d.Rule != RuleSyntax {
						t.Errorf("schema finding reported beside a syntax error: %s", d)
					}
				}
				if len(ds) == 0 {
					t.Error("no syntax error reported")
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

// genHCL writes a spec with n tasks shaped like internal/gendag's,
// plus the fields gendag leaves out, so benchmarks and the chunking test need
// no external program.
func genHCL(n int) []byte {
	var b bytes.Buffer
	b.WriteString("pipeline \"bench\" {\n  code_version = \"1\"\n\n")
	b.WriteString("  schedule {\n    every   = \"24h\"\n    start   = \"2024-01-01T00:00:00Z\"\n    catchup = false\n  }\n\n")
	b.WriteString("  error \"transient\" { exit_codes = [75] }\n\n")
	b.WriteString("  retry \"default\" {\n    max_attempts = 3\n    initial      = \"1s\"\n    multiplier   = 2\n    max_delay    = \"1m\"\n    jitter       = \"full\"\n    max_elapsed  = \"10m\"\n    on           = [\"transient\"]\n  }\n\n")
	for i := range n {
		fmt.Fprintf(&b, "  task \"t%d\" {\n    command = [\"true\"]\n    timeout = \"1m\"\n", i)
		if i > 0 {
			fmt.Fprintf(&b, "    depends_on = [\"t%d\", \"t%d\"]\n", i/2, i-1)
		}
		if i%10 == 0 {
			fmt.Fprintf(&b, "    outputs = [\"a%d\"]\n", i)
		}
		if i%10 == 5 {
			fmt.Fprintf(&b, "    inputs = [\"a%d\", \"a%d@-1\"] # two intervals\n", i-5, i-5)
		}
		if i%7 == 0 {
			b.WriteString("    retry = \"default\"\n    env = { MODE = \"full\" }\n")
		}
		if i%13 == 0 {
			b.WriteString("    heartbeat {\n      every = \"10s\"\n      lease = \"60s\"\n    }\n")
		}
		b.WriteString("  }\n\n")
	}
	b.WriteString("  check \"final_ok\" {\n    input         = \"a0\"\n    row_count_min = 1\n  }\n\n")
	b.WriteString("  sink \"out\" {\n    type    = \"directory\"\n    path    = \"warehouse/bench\"\n    fencing = \"token\"\n  }\n\n")
	b.WriteString("  publish \"final_out\" {\n    artifact = \"a0\"\n    sink     = \"out\"\n  }\n}\n")
	return b.Bytes()
}

// BenchmarkLoadHCL measures LoadHCL on generated specs of 1k, 10k and 100k
// tasks (about 100 bytes a task); growth should be linear.
func BenchmarkLoadHCL(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		src := genHCL(n)
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				p, ds := LoadHCL("bench.hcl", src)
				if len(ds) > 0 || len(p.Tasks) != n {
					b.Fatalf("bad load: %d tasks, %v", len(p.Tasks), ds)
				}
			}
		})
	}
}

// BenchmarkLoadHCLWhole is the one-piece path, to show what chunking buys.
func BenchmarkLoadHCLWhole(b *testing.B) {
	src := genHCL(10000)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ds := loadWhole("bench.hcl", src); len(ds) > 0 {
			b.Fatal(ds)
		}
	}
}

// TestFastParse checks the direct tree builder piece by piece against
// hclsyntax: every piece of the plain specs must take the fast path, and what
// it decodes to must be what hclsyntax's tree decodes to.
func TestFastParse(t *testing.T) {
	srcs := map[string][]byte{"gen.hcl": genHCL(200), "escapes.hcl": []byte(escapesHCL)}
	for _, path := range specFiles(t, "ok") {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		srcs[filepath.Base(path)] = src
	}
	for name, src := range srcs {
		lay, ok := layoutHCL(src, 1)
		if !ok {
			t.Fatalf("%s: no layout", name)
		}
		for _, pc := range lay.pieces {
			fast, ok := fastParse(name, src, pc.start, pc.end, pc.line)
			if !ok {
				t.Errorf("%s: piece at line %d left the fast path:\n%s", name, pc.line, src[pc.start:pc.end])
				continue
			}
			slowL := &hclLoader{file: name}
			slow, _ := slowL.parse(src[pc.start:pc.end], hcl.Pos{Line: pc.line, Column: 1, Byte: pc.start})
			fastL := &hclLoader{file: name}
			want, got := slowL.decodePipelineBody(slow), fastL.decodePipelineBody(fast)
			if diff := cmp.Diff(want.p, got.p); diff != "" {
				t.Errorf("%s: piece at line %d decodes differently (-hclsyntax +fast):\n%s", name, pc.line, diff)
			}
			if diff := cmp.Diff(append(want.schedules, nil), append(got.schedules, nil)); diff != "" {
				t.Errorf("%s: schedules differ:\n%s", name, diff)
			}
			if diff := cmp.Diff(slowL.ds.Sort(), fastL.ds.Sort()); diff != "" {
				t.Errorf("%s: findings differ:\n%s", name, diff)
			}
		}
	}
	// Outside the subset, the fast path must give up rather than guess.
	for _, piece := range []string{
		"a = \"x\\u0041\"\n", "a = \"x\\q\"\n", "a = \"x\\\n", "a = \"x\\${b}\"\n", "a = \"${b}\"\n", "a = -1\n", "a = 1e3\n", "a = b\n", "a = \"é\"\n",
		"a = 1\r\n", "a = <<EOT\nx\nEOT\n", "b { /* c */\n}\n", "a = 1\na = 2\n", "a = [1 2]\n",
		"a = { b = 1\n}\n", "b x {\n}\n", "a = \"\"\n", "a = 1 }\n", "b { a = 1, c = 2 }\n", "a = null\n",
	} {
		if _, ok := fastParse("t.hcl", []byte(piece), 0, len(piece), 1); ok {
			t.Errorf("fast path accepted %q", piece)
		}
	}
}

// escapesHCL holds the escapes the fast path reads itself, in values,
// labels and maps, next to text that only looks like one.
const escapesHCL = `pipeline "esc" {
  task "t\"q" {
    command = ["sh", "-c", "printf 'id\n1\n' > \"$OUT/final.csv\"", "a\tb\r", "\\"]
    env     = { MODE = "a\"b", PATH = "C:\\bin" }
    timeout = "1m"
  }

  task "t2" {
    command = ["echo", "\n"] # \n in a comment
  }
}
`

// TestFieldsDecodable checks that every field of the table can be decoded:
// a plain field has a value kind and a setter, a nested one names a kind of
// the table.
func TestFieldsDecodable(t *testing.T) {
	fields := Fields()
	for kind, fs := range fields {
		for _, f := range fs {
			switch {
			case f.Nested != "":
				if _, ok := fields[f.Nested]; !ok || f.Value != ValNested || f.set != nil {
					t.Errorf("%s.%s: nested field of unknown kind %q, or with a value kind or setter", kind, f.Name, f.Nested)
				}
			case f.Value == ValNested || f.set == nil:
				t.Errorf("%s.%s: plain field without a value kind or setter", kind, f.Name)
			case (f.Value == ValRef || f.Value == ValRefs) && f.RefKind == "":
				t.Errorf("%s.%s: reference without RefKind", kind, f.Name)
			case f.Value == ValEnum && len(f.Enum) == 0:
				t.Errorf("%s.%s: enum without values", kind, f.Name)
			case (f.Value == ValInt || f.Value == ValInts) && f.Min >= f.Max:
				t.Errorf("%s.%s: integer with empty bounds [%d, %d]", kind, f.Name, f.Min, f.Max)
			}
		}
	}
}

// TestHCLSchemasMatchFields checks the HCL grammar against Fields, the table
// the CUE loader and schema/pipeline.cue are checked against too.
func TestHCLSchemasMatchFields(t *testing.T) {
	schemas := map[string]*hcl.BodySchema{
		KindPipeline: pipelineSchema, KindSchedule: scheduleSchema, KindRetryBudget: budgetSchema,
		KindPool: poolSchema, KindError: errorSchema, KindRetry: retrySchema, KindTask: taskSchema,
		KindHeartbeat: heartbeatSchema, KindFailover: failoverSchema, KindCheck: checkSchema,
		KindSink: sinkSchema, KindPublish: publishSchema,
	}
	fields := Fields()
	if len(schemas) != len(fields) {
		t.Errorf("%d HCL schemas for %d kinds in Fields", len(schemas), len(fields))
	}
	for kind, want := range fields {
		schema := schemas[kind]
		if schema == nil {
			t.Errorf("no HCL schema for %s", kind)
			continue
		}
		var got []Field
		for _, a := range schema.Attributes {
			got = append(got, Field{Name: a.Name, Required: a.Required})
		}
		for _, b := range schema.Blocks {
			got = append(got, Field{Name: b.Type, Nested: b.Type, Labelled: len(b.LabelNames) > 0})
		}
		// Attributes come before blocks in a schema.
		var wantShape []Field
		for _, blocks := range []bool{false, true} {
			for _, f := range want {
				if (f.Nested != "") == blocks {
					wantShape = append(wantShape, Field{Name: f.Name, Required: f.Required, Nested: f.Nested, Labelled: f.Labelled})
				}
			}
		}
		if diff := cmp.Diff(wantShape, got, cmpopts.IgnoreUnexported(Field{})); diff != "" {
			t.Errorf("%s: HCL schema and Fields differ (-Fields +HCL):\n%s", kind, diff)
		}
	}
}
