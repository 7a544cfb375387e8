package lint

import (
	"testing"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
)

// TestDocExamples keeps the docs honest: every rule's bad example must raise
// the rule and its fixed example must not. Neither may be broken in another
// way (a syntax or schema error) unless that is the rule being shown.
func TestDocExamples(t *testing.T) {
	for _, r := range All() {
		t.Run(r.ID, func(t *testing.T) {
			bad, fixed := Examples(r)
			if bad == "" || fixed == "" {
				t.Fatal("no examples")
			}
			if n := countRule(t, r.ID, bad); n == 0 {
				t.Errorf("the bad example raises no %s finding:\n%s", r.ID, bad)
			}
			if n := countRule(t, r.ID, fixed); n != 0 {
				t.Errorf("the fixed example raises %d %s finding(s):\n%s", n, r.ID, fixed)
			}
		})
	}
}

// countRule loads an example as HCL and counts the findings of one rule from
// the loader, the compiler and the linter.
func countRule(t *testing.T, id, src string) int {
	t.Helper()
	p, ds := spec.Load(spec.SyntaxHCL, "example.hcl", []byte(src))
	if p != nil {
		res, cds := compiler.Compile(p)
		ds = append(ds, cds...)
		ds = append(ds, Run(res, []byte(src), Options{Now: fixedNow})...)
	}
	n := 0
	for _, d := range ds {
		switch {
		case d.Rule == id:
			n++
		case d.Severity == diag.Error && (d.Rule == spec.RuleSyntax || d.Rule == spec.RuleSchema):
			t.Errorf("example is broken: %s", d)
		}
	}
	return n
}
