package lint

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
)

func TestCatalogueIsValid(t *testing.T) {
	if err := Validate(All()); err != nil {
		t.Fatal(err)
	}
	// One rule per file: every rule_<id>.go declares the rule <id>, and every
	// rule of the catalogue has its file. Nothing here counts rules by hand.
	files, err := filepath.Glob("rule_*.go")
	if err != nil {
		t.Fatal(err)
	}
	fromFiles := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		id := strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(f, "rule_"), ".go"), "_", "-")
		fromFiles[id] = true
		if Lookup(id) == nil {
			t.Errorf("%s: no rule %q in the catalogue (lint/catalogue.go)", f, id)
		}
	}
	for _, r := range All() {
		if !fromFiles[r.ID] {
			t.Errorf("rule %s has no file rule_%s.go", r.ID, strings.ReplaceAll(r.ID, "-", "_"))
		}
	}
	for _, r := range All() {
		if Title(r.Doc) == "" {
			t.Errorf("%s: no title line", r.ID)
		}
	}
}

func TestValidateRefuses(t *testing.T) {
	good := Rule{ID: "ok-rule", Doc: "Title.\n\nBad:\n\n    x\n\nFixed:\n\n    y\n"}
	tests := map[string]func(*Rule){
		"empty doc":       func(r *Rule) { r.Doc = "" },
		"upper-case id":   func(r *Rule) { r.ID = "Bad-Rule" },
		"underscore id":   func(r *Rule) { r.ID = "bad_rule" },
		"trailing dash":   func(r *Rule) { r.ID = "bad-" },
		"empty id":        func(r *Rule) { r.ID = "" },
		"no summary line": func(r *Rule) { r.Doc = "Title\nrunning on.\n\nBad:\n\n    x\n\nFixed:\n\n    y\n" },
		"other summary":   func(r *Rule) { r.Summary = "something else" },
		"no bad example":  func(r *Rule) { r.Doc = "Title.\n\nFixed:\n\n    y\n" },
		"fixed first":     func(r *Rule) { r.Doc = "Title.\n\nFixed:\n\n    y\n\nBad:\n\n    x\n" },
	}
	if err := Validate([]*Rule{&good}); err != nil {
		t.Fatalf("good rule refused: %v", err)
	}
	for name, mutate := range tests {
		r := good
		mutate(&r)
		if err := Validate([]*Rule{&r}); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, r)
		}
	}
	dup := good
	if err := Validate([]*Rule{&good, &dup}); err == nil {
		t.Error("Validate accepted a duplicate id")
	}
}

func TestAllReturnsCopies(t *testing.T) {
	a := All()
	a[0].Severity = diag.Info
	a[0].Run = nil
	if b := All(); b[0].Severity == diag.Info || Lookup(b[0].ID).Severity == diag.Info {
		t.Fatal("changing a rule from All changed the catalogue")
	}
}

func TestCheckOptions(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Disable: []string{"retry-strom"}}, `unknown rule "retry-strom"; did you mean "retry-storm"?`},
		{Options{Enable: []string{"nope"}}, `unknown rule "nope"`},
		{Options{Disable: []string{"cycle"}}, "reported by the compiler"},
		{Options{Disable: []string{"retry-storm"}, Enable: []string{"retry-storm"}}, "both enabled and disabled"},
		{Options{Workers: -1}, "workers"},
	} {
		err := CheckOptions(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckOptions(%+v) = %v, want %q", tc.opts, err, tc.want)
		}
	}
	if err := CheckOptions(Options{Disable: []string{"retry-storm", "unused-suppression"}, Enable: []string{"unused-artifact"}}); err != nil {
		t.Error(err)
	}
}

// rng makes a distinct range per line of a hand-built spec.
func rng(line int) diag.Range {
	return diag.Range{Filename: "p.hcl", Start: diag.Pos{Line: line, Column: 3}, End: diag.Pos{Line: line, Column: 9}}
}

func mustCompile(t *testing.T, p *spec.Pipeline) *compiler.Result {
	t.Helper()
	res, ds := compiler.Compile(p)
	if res == nil {
		t.Fatalf("compile: %v", ds)
	}
	return res
}

func TestDisableEnableAndOffByDefault(t *testing.T) {
	p := &spec.Pipeline{Name: "p", File: "p.hcl", NameRange: rng(1),
		Tasks:  []spec.Task{{Named: spec.Named{Name: "a", NameRange: rng(2), Range: rng(2)}, Outputs: []spec.Ref{{Name: "x", Range: rng(3)}}}},
		Checks: []spec.Check{{Named: spec.Named{Name: "c", NameRange: rng(4)}, Input: spec.Ref{Name: "x", Range: rng(5)}}}}
	res := mustCompile(t, p)
	got := ruleIDs(Run(res, nil, Options{}))
	if got != "unused-artifact empty-check" {
		t.Fatalf("default run: %s", got)
	}
	if got := ruleIDs(Run(res, nil, Options{Disable: []string{"empty-check"}})); got != "unused-artifact" {
		t.Errorf("disable empty-check: %s", got)
	}
	// A rule off by default runs only when enabled.
	off := Rule{ID: "always", Severity: diag.Info, Summary: "s", Doc: "d", Run: func(p *Pass) error {
		p.Reportf(p.Spec.NameRange, "here")
		return nil
	}}
	rules := []*Rule{&off}
	offByDefaultForTest := map[string]bool{"always": true}
	if got := ruleIDs(runWith(rules, offByDefaultForTest, res, Options{})); got != "" {
		t.Errorf("off-by-default rule ran: %s", got)
	}
	if got := ruleIDs(runWith(rules, offByDefaultForTest, res, Options{Enable: []string{"always"}})); got != "always" {
		t.Errorf("enabled rule did not run: %s", got)
	}
}

func TestInternalErrorIsAFinding(t *testing.T) {
	p := &spec.Pipeline{Name: "p", File: "p.hcl", NameRange: rng(1)}
	broken := Rule{ID: "broken", Severity: diag.Warning, Summary: "s", Doc: "d", Run: func(*Pass) error { return errTest }}
	panics := Rule{ID: "panics", Severity: diag.Warning, Summary: "s", Doc: "d", Run: func(*Pass) error { panic("oops") }}
	ds := runWith([]*Rule{&broken, &panics}, nil, mustCompile(t, p), Options{})
	if len(ds) != 2 || ds[0].Severity != diag.Error || !strings.Contains(ds[0].Message, "internal error in rule broken: boom") ||
		!strings.Contains(ds[1].Message, "internal error in rule panics: panic: oops") {
		t.Fatalf("got %v", ds)
	}
}

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("boom")

func TestNilResult(t *testing.T) {
	if ds := Run(nil, nil, Options{}); ds != nil {
		t.Fatal(ds)
	}
}

func ruleIDs(ds diag.Diagnostics) string {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.Rule
	}
	return strings.Join(ids, " ")
}

var fixedNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func runWith(rules []*Rule, off map[string]bool, res *compiler.Result, opts Options) diag.Diagnostics {
	return run(rules, off, res, nil, opts)
}
