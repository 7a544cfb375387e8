package report

import (
	"cmp"
	"slices"
	"strings"

	"github.com/pipec/pipec/diag"
)

// Rule is the metadata a printer needs about one lint rule: SARIF embeds it in
// the tool's rule table so code-scanning UIs can show help beside a finding.
// The linter builds these from its rule values; report does not import lint,
// so printers stay a leaf that any layer can call.
type Rule struct {
	// ID is the rule's slug, as in Diagnostic.Rule ("bypassed-validation").
	ID string
	// Severity is the rule's default severity.
	Severity diag.Severity
	// Summary is one line saying what the rule catches.
	Summary string
	// Help is the rule's documentation after its summary (what exactly, why,
	// a bad and a fixed example), plain text that also reads as Markdown.
	Help string
	// HelpURI points at the rule's documentation online, if any.
	HelpURI string
}

// ruleTable returns the rules sorted by ID with duplicates dropped, plus a
// placeholder for every rule a finding names that the caller did not describe
// (a loader's "syntax" finding, say), so every result can point into the table.
func ruleTable(rules []Rule, ds diag.Diagnostics) []Rule {
	out := slices.Clone(rules)
	known := make(map[string]bool, len(out))
	for _, r := range out {
		known[r.ID] = true
	}
	for _, d := range ds {
		if !known[d.Rule] {
			known[d.Rule] = true
			out = append(out, Rule{ID: d.Rule, Severity: d.Severity,
				Summary: "Findings reported under the " + d.Rule + " rule."})
		}
	}
	slices.SortStableFunc(out, func(a, b Rule) int { return cmp.Compare(a.ID, b.ID) })
	return slices.CompactFunc(out, func(a, b Rule) bool { return a.ID == b.ID })
}

// friendlyName turns a rule slug into the Pascal-case name SARIF viewers show
// ("bypassed-validation" -> "BypassedValidation").
func friendlyName(id string) string {
	var b strings.Builder
	upper := true
	for _, r := range id {
		switch {
		case r == '-' || r == '_' || r == '.' || r == ' ':
			upper = true
		case upper:
			b.WriteString(strings.ToUpper(string(r)))
			upper = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// sentence makes s end like a sentence, as SARIF viewers expect of
// descriptions and messages.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	switch s[len(s)-1] {
	case '.', '!', '?':
		return s
	}
	return s + "."
}

// firstParagraph returns the text up to the first blank line, joined onto one line.
func firstParagraph(s string) string {
	s = strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n"))
	if i := strings.Index(s, "\n\n"); i >= 0 {
		s = s[:i]
	}
	return strings.Join(strings.Fields(s), " ")
}
