package cli_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pipec/pipec/cli"
	"github.com/pipec/pipec/internal/golden"
	"github.com/pipec/pipec/lint"
)

var srcRootURI = regexp.MustCompile(`"uri": "file:///[^"]*/"`)

// run calls pipec in-process with captured streams.
func run(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = cli.Main(args, cli.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
		Getenv: func(string) string { return "" }})
	return out.String(), errb.String(), code
}

// TestLintGolden lints a folder of HCL and CUE specs (nested, with a file that
// is not a spec) in every format and compares with golden files. Regenerate
// with PIPEC_UPDATE_GOLDEN=1.
func TestLintGolden(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "lint", "testdata", "golden"))
	if err != nil {
		t.Fatal(err)
	}
	rootCfg, err := filepath.Abs(filepath.Join("testdata", "sarif-root.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, format := range []string{"text", "json", "sarif", "github"} {
		t.Run(format, func(t *testing.T) {
			// The configuration makes SARIF paths relative to the repository
			// root whether or not the checkout has a .git.
			out, errs, code := run("lint", "--config", rootCfg, "--format", format, "--now", "2026-01-01T00:00:00Z", "specs")
			if code != cli.ExitFindings || errs != "" {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			// SARIF's %SRCROOT% is the checkout's absolute root, which differs
			// from machine to machine; every other path is relative to it.
			out = srcRootURI.ReplaceAllString(out, `"uri": "file:///CHECKOUT/"`)
			if format == "sarif" {
				out = withoutRuleTable(t, out)
			}
			golden.Check(t, "lint."+format+".golden", []byte(out))
			if strings.Contains(out, dir) {
				t.Errorf("output holds the absolute path %s", dir)
			}
		})
	}
}

// withoutRuleTable checks the SARIF log's rule table (every rule of the
// catalogue, help pointing at its docs/rules page, every result pointing at
// its rule) and returns the log without it, so the golden file holds the
// findings only and adding a rule does not change it.
func withoutRuleTable(t *testing.T, out string) string {
	t.Helper()
	var log map[string]any
	if err := json.Unmarshal([]byte(out), &log); err != nil {
		t.Fatal(err)
	}
	run := log["runs"].([]any)[0].(map[string]any)
	driver := run["tool"].(map[string]any)["driver"].(map[string]any)
	rules := driver["rules"].([]any)
	ids := map[string]bool{}
	for _, r := range rules {
		r := r.(map[string]any)
		id := r["id"].(string)
		ids[id] = true
		if lint.Lookup(id) != nil && r["helpUri"] != lint.DocURL(id) {
			t.Errorf("rule %s: helpUri %v, want %s", id, r["helpUri"], lint.DocURL(id))
		}
	}
	for _, r := range lint.All() {
		if !ids[r.ID] {
			t.Errorf("the rule table lacks %s", r.ID)
		}
	}
	for i, res := range run["results"].([]any) {
		res := res.(map[string]any)
		idx := int(res["ruleIndex"].(float64))
		if idx >= len(rules) || rules[idx].(map[string]any)["id"] != res["ruleId"] {
			t.Errorf("result %d: ruleIndex %d is not rule %v", i, idx, res["ruleId"])
		}
		delete(res, "ruleIndex")
	}
	delete(driver, "rules")
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(log); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestLintOptions(t *testing.T) {
	dir := filepath.Join("..", "lint", "testdata", "golden", "specs")
	orders := filepath.Join(dir, "orders.hcl")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"lint", "--disable", "retry-strom", orders}, cli.ExitUsage, `unknown rule "retry-strom"; did you mean "retry-storm"?`},
		{[]string{"lint", "--disable", "cycle", orders}, cli.ExitUsage, "reported by the compiler"},
		{[]string{"lint", "--format", "xml", orders}, cli.ExitUsage, "unknown --format"},
		{[]string{"lint", "--now", "yesterday", orders}, cli.ExitUsage, "--now"},
		{[]string{"lint", "--workers", "0", orders}, cli.ExitUsage, "--workers"},
	} {
		_, errs, code := run(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("pipec %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, errs, tc.code, tc.want)
		}
	}

	// Turning off every rule with an error finding leaves warnings: exit 0,
	// unless --strict.
	errorRules := "--disable=retry-deterministic,secret-literal,empty-check,bypassed-validation"
	out, _, code := run("lint", "--now", "2026-01-01T00:00:00Z", errorRules, orders)
	if code != cli.ExitOK || strings.Contains(out, "error:") || !strings.Contains(out, "[catchup-stampede]") {
		t.Errorf("disabled error rules: exit %d\n%s", code, out)
	}
	if _, _, code := run("lint", "--strict", errorRules, orders); code != cli.ExitFindings {
		t.Errorf("--strict with warnings: exit %d", code)
	}
	// The suppressed finding stays suppressed, and the clean spec has nothing to say.
	if out, _, code := run("lint", filepath.Join(dir, "nested", "clean.cue")); code != cli.ExitOK || out != "" {
		t.Errorf("clean spec: exit %d\n%s", code, out)
	}
}

// compile refuses a spec with lint errors, as lint does, and shows its
// warnings as well.
func TestCompileRefusesLintErrors(t *testing.T) {
	_, errs, code := run("compile", filepath.Join("..", "lint", "testdata", "golden", "specs", "orders.hcl"))
	if code != cli.ExitFindings || !strings.Contains(errs, "[secret-literal]") || !strings.Contains(errs, "warning:") {
		t.Errorf("exit %d, stderr:\n%s", code, errs)
	}
	out, _, code := run("compile", filepath.Join("..", "lint", "testdata", "golden", "specs", "nested", "clean.cue"))
	if code != cli.ExitOK || !strings.Contains(out, `"apiVersion": "pipec/v1"`) {
		t.Errorf("clean spec: exit %d\n%s", code, out)
	}
}

func TestExplain(t *testing.T) {
	out, _, code := run("explain")
	if code != cli.ExitOK {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if f := strings.Fields(lines[0]); len(lines) != len(lint.All()) || len(f) < 3 || f[0] != "bypassed-validation" || f[1] != "error" || f[2] != "a" {
		t.Errorf("explain lists:\n%s", out)
	}
	out, _, code = run("explain", "unfenced-sink")
	if code != cli.ExitOK || !strings.HasPrefix(out, "unfenced-sink (warning)\n\n") || !strings.Contains(out, "\nBad:\n") || !strings.Contains(out, "\nFixed:\n") {
		t.Errorf("explain unfenced-sink: exit %d\n%s", code, out)
	}
	_, errs, code := run("explain", "unfenced-snk")
	if code != cli.ExitUsage || !strings.Contains(errs, `did you mean "unfenced-sink"?`) {
		t.Errorf("unknown rule: exit %d, %q", code, errs)
	}
	if _, _, code := run("explain", "a", "b"); code != cli.ExitUsage {
		t.Errorf("two rules: exit %d", code)
	}
}

// TestLintSARIFIsValid checks pipec's real SARIF output, rule docs included,
// against the SARIF 2.1.0 JSON schema the report package's tests keep.
func TestLintSARIFIsValid(t *testing.T) {
	c := jsonschema.NewCompiler()
	schema, err := c.Compile(filepath.Join("..", "report", "testdata", "sarif-2.1.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	out, _, _ := run("lint", "--format", "sarif", "--now", "2026-01-01T00:00:00Z", filepath.Join("..", "lint", "testdata", "golden", "specs"))
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(doc); err != nil {
		t.Fatalf("SARIF output is not valid: %v", err)
	}
}
