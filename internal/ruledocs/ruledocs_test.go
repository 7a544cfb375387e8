package ruledocs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pipec/pipec/internal/golden"
	"github.com/pipec/pipec/lint"
)

const dir = "../../docs/rules"

// TestPagesCurrent checks docs/rules/*.md against the rules' docs: every rule
// has a current page, the index lists them all, and no page is left over from
// a removed rule. PIPEC_UPDATE_GOLDEN=1 regenerates the pages.
func TestPagesCurrent(t *testing.T) {
	if golden.Updating() {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rules := lint.All()
	want := []string{"README.md"}
	for _, r := range rules {
		golden.Check(t, filepath.Join(dir, r.ID+".md"), Markdown(r))
		want = append(want, r.ID+".md")
	}
	golden.Check(t, filepath.Join(dir, "README.md"), Index(rules))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains(want, e.Name()) {
			if golden.Updating() {
				_ = os.Remove(filepath.Join(dir, e.Name()))
				continue
			}
			t.Errorf("docs/rules/%s belongs to no rule (PIPEC_UPDATE_GOLDEN=1 removes it)", e.Name())
		}
	}
}

// TestDocURLPointsAtPages checks that the address SARIF and the language
// server give for a rule is the page this package writes.
func TestDocURLPointsAtPages(t *testing.T) {
	for _, r := range lint.All() {
		u := lint.DocURL(r.ID)
		if !strings.HasSuffix(u, "/docs/rules/"+r.ID+".md") {
			t.Errorf("DocURL(%q) = %q, not the docs/rules page", r.ID, u)
		}
	}
}

func TestBodyFencesExamples(t *testing.T) {
	got := body("Title.\n\nBad:\n\n    a {\n\n      b = 1\n    }\n\nFixed:\n\n    c\n")
	want := "Title.\n\n## Bad\n\n```hcl\na {\n\n  b = 1\n}\n```\n\n## Fixed\n\n```hcl\nc\n```\n"
	if got != want {
		t.Errorf("body:\n%s\nwant:\n%s", got, want)
	}
}
