package cli_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pipec/pipec/cli"
	"github.com/pipec/pipec/runtime/store"
)

// eventsHCL exercises most event kinds: a retried transient failure, a
// deterministic one, a check that rejects, a dependent not run, a publish
// that wins, then (on the rerun) reuse and an idempotent publish.
const eventsHCL = `
pipeline "ev" {
  code_version = "c1"
  error "transient" {
    exit_codes = [75]
  }
  error "schema" {
    exit_codes    = [65]
    deterministic = true
  }
  retry "r" {
    max_attempts = 3
    initial      = "10ms"
    on           = ["transient"]
  }
  task "flaky" {
    command = ["sh", "-c", "n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; [ $n -ge 1 ] || exit 75; printf 'id\n1\n2\n' > \"$PIPEC_OUTPUT_rows/rows.csv\""]
    outputs = ["rows"]
    retry   = "r"
  }
  task "dups" {
    command = ["sh", "-c", "printf 'id\n1\n1\n' > \"$PIPEC_OUTPUT_dup_rows/d.csv\""]
    outputs = ["dup_rows"]
  }
  task "after_dups" {
    command = ["true"]
    inputs  = ["dup_rows"]
  }
  task "boom" {
    command = ["sh", "-c", "echo 'bad header' >&2; exit 65"]
    retry   = "r"
  }
  check "rows_ok" {
    input         = "rows"
    row_count_min = 1
    unique        = ["id"]
  }
  check "dups_ok" {
    input  = "dup_rows"
    unique = ["id"]
  }
  sink "out" {
    type    = "directory"
    path    = "out"
    fencing = "token"
  }
  sink "dout" {
    type    = "directory"
    path    = "dout"
    fencing = "token"
  }
  publish "rows_out" {
    artifact = "rows"
    sink     = "out"
  }
  publish "dups_out" {
    artifact = "dup_rows"
    sink     = "dout"
  }
}
`

// runIO calls pipec in-process with the real environment (tasks need PATH).
func runIO(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = cli.Main(args, cli.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
		Getenv: os.Getenv, Environ: os.Environ})
	return out.String(), errb.String(), code
}

// TestEventStreamsMatchSchema: `pipec run --json` and `pipec events --json`
// print one documented event shape (schema/events.schema.json): every line
// of both validates, every kind seen is documented, and the run's stream is
// the same entries, byte for byte and in order, as the log events prints
// afterwards (plus the closing run.summary line).
func TestEventStreamsMatchSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	sch, err := c.Compile(filepath.Join("..", "schema", "events.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	spec := filepath.Join(dir, "p.hcl")
	if err := os.WriteFile(spec, []byte(eventsHCL), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state.db")
	validate := func(what, out string) []map[string]any {
		t.Helper()
		var docs []map[string]any
		for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			var doc map[string]any
			if err := json.Unmarshal([]byte(line), &doc); err != nil {
				t.Fatalf("%s line %d is not JSON: %v\n%s", what, i+1, err, line)
			}
			var v any
			_ = json.Unmarshal([]byte(line), &v)
			if err := sch.Validate(v); err != nil {
				t.Errorf("%s line %d does not match schema/events.schema.json: %v\n%s", what, i+1, err, line)
			}
			docs = append(docs, doc)
		}
		return docs
	}
	kinds := map[string]bool{}
	for round, wantCode := range []int{cli.ExitFindings, cli.ExitFindings} {
		runOut, errs, code := runIO("run", spec, "--interval", "2024-01-01", "--state", state, "--seed", "3", "--json")
		if code != wantCode {
			t.Fatalf("round %d: run exited %d, want %d:\n%s\n%s", round, code, wantCode, runOut, errs)
		}
		runDocs := validate("run --json", runOut)
		last := runDocs[len(runDocs)-1]
		if last["kind"] != "run.summary" {
			t.Fatalf("run --json does not end with run.summary: %v", last)
		}
		runID := last["summary"].(map[string]any)["run_id"].(string)
		evOut, errs, code := runIO("events", runID, "--json", "--state", state)
		if code != 0 {
			t.Fatalf("events exited %d: %s", code, errs)
		}
		for _, d := range validate("events --json", evOut) {
			kinds[d["kind"].(string)] = true
		}
		runLines := strings.Split(strings.TrimSuffix(runOut, "\n"), "\n")
		evLines := strings.Split(strings.TrimSuffix(evOut, "\n"), "\n")
		if !slices.Equal(runLines[:len(runLines)-1], evLines) {
			t.Errorf("round %d: run --json and events --json differ:\nrun:\n%s\nevents:\n%s", round, strings.Join(runLines[:len(runLines)-1], "\n"), evOut)
		}
	}
	// A publish entry belongs to the run that produced the version: the
	// rerun's idempotent republish of the reused version is in r1's log.
	evOut, errs, code := runIO("events", "ev/2024-01-01/r1", "--json", "--state", state)
	if code != 0 {
		t.Fatalf("events exited %d: %s", code, errs)
	}
	for _, d := range validate("events --json", evOut) {
		kinds[d["kind"].(string)] = true
	}
	for _, k := range []string{"run.created", "run.finished", "attempt.started", "attempt.running", "attempt.finished",
		"attempt.retry", "task.failed", "task.not_run", "task.reused", "version.recorded", "version.accepted",
		"version.rejected", "check.passed", "check.failed", "publish.won", "publish.idempotent"} {
		if !kinds[k] {
			t.Errorf("the scenario recorded no %s event; seen: %v", k, kinds)
		}
	}
}

// TestEveryEventKindDocumented: every event kind the runtime and the stores
// declare (string constants named Event*) is in schema/events.schema.json's
// list of kinds, so the schema cannot fall behind the code.
func TestEveryEventKindDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "schema", "events.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sch struct {
		Defs struct {
			Kind struct {
				Enum []string `json:"enum"`
			} `json:"kind"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(b, &sch); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, k := range sch.Defs.Kind.Enum {
		documented[k] = true
	}
	// The registry and the schema list the same kinds.
	registered := map[string]bool{}
	for _, k := range store.EventKinds() {
		registered[string(k.Kind)] = true
		if !documented[string(k.Kind)] {
			t.Errorf("store.EventKinds has %q, schema/events.schema.json's kinds do not", k.Kind)
		}
		if k.Doc == "" {
			t.Errorf("store.EventKinds: %q has no doc", k.Kind)
		}
	}
	for k := range documented {
		if !registered[k] {
			t.Errorf("schema/events.schema.json has kind %q, store.EventKinds does not", k)
		}
	}
	// Every Event* constant of the runtime (any package under runtime/)
	// is a registered kind.
	var files []string
	_ = filepath.WalkDir(filepath.Join("..", "runtime"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	fset := token.NewFileSet()
	declared := 0
	{
		for _, path := range files {
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if !strings.HasPrefix(name.Name, "Event") || i >= len(vs.Values) {
							continue
						}
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						kind, _ := strconv.Unquote(lit.Value)
						declared++
						if !registered[kind] {
							t.Errorf("%s: %s = %q is not a registered kind (store.EventKinds)", path, name.Name, kind)
						}
					}
				}
			}
		}
	}
	if declared < 20 {
		t.Errorf("found only %d event kinds in the code: the test reads the wrong files", declared)
	}
}
