package lint

import (
	"strings"
	"testing"
	"unicode"

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

// TestDocStatesSummaryOnce: a rule's summary line is its one statement of
// what it catches; `pipec explain`, the rule pages and the language server
// print it, then the details, which must say more rather than the same again.
// A first paragraph of the details made mostly (60% or more) of the
// summary's words restates it.
func TestDocStatesSummaryOnce(t *testing.T) {
	for _, r := range All() {
		details := r.Details()
		if strings.HasPrefix(strings.TrimSpace(r.Doc), details) || strings.Contains(details, r.Summary) {
			t.Errorf("%s: the details repeat the summary line %q", r.ID, r.Summary)
		}
		first, _, _ := strings.Cut(details, "\n\n")
		summary, para := docWords(r.Summary), docWords(first)
		shared := 0
		for w := range para {
			if summary[w] {
				shared++
			}
		}
		if len(para) > 0 && shared*10 >= len(para)*6 {
			t.Errorf("%s: the details' first paragraph restates the summary %q (%d of its %d words are the summary's):\n%s",
				r.ID, r.Summary, shared, len(para), first)
		}
		explanation := Explanation(r)
		if n := strings.Count(strings.ToLower(explanation), strings.ToLower(strings.TrimSuffix(Sentence(r.Summary), "."))); n != 1 {
			t.Errorf("%s: pipec explain states the summary %d times:\n%s", r.ID, n, explanation)
		}
	}
}

// TestEmptyCheckDocNamesEveryAssertion: the empty-check doc lists every
// check field that makes a check assert something.
func TestEmptyCheckDocNamesEveryAssertion(t *testing.T) {
	doc := Lookup("empty-check").Details()
	for _, f := range []string{"row_count_min", "row_count_max", "unique", "not_null", "columns", "command", "code_version_column"} {
		if !strings.Contains(doc, f) {
			t.Errorf("the empty-check doc does not name %s among the assertions that count", f)
		}
	}
}

// docWords are the words of a text that carry meaning: lower-cased, at least
// three letters, without the commonest small words.
func docWords(s string) map[string]bool {
	small := map[string]bool{"the": true, "and": true, "that": true, "with": true, "not": true, "for": true,
		"its": true, "one": true, "only": true, "from": true, "are": true, "has": true, "says": true}
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_'
	}) {
		if len(w) >= 3 && !small[w] {
			out[w] = true
		}
	}
	return out
}
