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

// TestPagesStateSummaryOnce: a page states its rule's summary once (in the
// severity line), and its only code blocks are the bad and fixed examples,
// so prose indented in a doc (a list's continuation lines) is never shown as
// HCL.
func TestPagesStateSummaryOnce(t *testing.T) {
	for _, r := range lint.All() {
		page := string(Markdown(r))
		summary := strings.ToLower(strings.TrimSuffix(lint.Sentence(r.Summary), "."))
		if n := strings.Count(strings.ToLower(page), summary); n != 1 {
			t.Errorf("%s.md states the summary %q %d times", r.ID, r.Summary, n)
		}
		bad, fixed := lint.Examples(r)
		var blocks []string
		for _, part := range strings.Split(page, "```hcl\n")[1:] {
			code, _, _ := strings.Cut(part, "```\n")
			blocks = append(blocks, code)
		}
		if want := []string{bad, fixed}; !slices.Equal(blocks, want) {
			t.Errorf("%s.md: its HCL blocks are not exactly the bad and fixed examples:\n%q", r.ID, blocks)
		}
	}
}

// TestEmptyCheckPageNamesCodeVersionColumn: code_version_column makes a
// check assert something, and the page says so.
func TestEmptyCheckPageNamesCodeVersionColumn(t *testing.T) {
	if page := string(Markdown(lint.Lookup("empty-check"))); !strings.Contains(page, "code_version_column") {
		t.Error("empty-check.md does not name code_version_column among the assertions that count")
	}
}
