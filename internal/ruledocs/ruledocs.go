// Package ruledocs renders the lint rules' documentation as the Markdown pages
// under docs/rules/, which SARIF's helpUri and the language server link to
// (lint.DocURL). The pages are generated from the rules' Doc strings, never
// edited by hand, so the web page and `pipec explain` cannot disagree; a test
// checks that the committed pages are current.
package ruledocs

import (
	"fmt"
	"strings"

	"github.com/pipec/pipec/lint"
)

// Header marks a generated page, so a reader knows not to edit it.
const Header = "<!-- Generated from the rule's Doc in lint/ by `PIPEC_UPDATE_GOLDEN=1 go test ./internal/ruledocs`. Do not edit. -->\n"

// Markdown is the page of one rule: its id, severity and summary (stated
// once), then the rest of its doc with the examples as fenced HCL blocks.
func Markdown(r *lint.Rule) []byte {
	var b strings.Builder
	b.WriteString(Header)
	fmt.Fprintf(&b, "\n# %s\n\n", r.ID)
	fmt.Fprintf(&b, "Default severity: **%s**. %s\n\n", r.Severity, summary(r))
	if !r.Reported() {
		b.WriteString("Found by the loaders or the compiler, not by a lint pass.\n\n")
	}
	b.WriteString(body(r.Details()))
	b.WriteString("\nSee also: `pipec explain " + r.ID + "`, and the [rule index](README.md).\n")
	return []byte(b.String())
}

// Index is docs/rules/README.md: every rule with its severity and summary.
func Index(rules []*lint.Rule) []byte {
	var b strings.Builder
	b.WriteString(Header)
	b.WriteString("\n# Lint rules\n\n")
	b.WriteString("`pipec lint` runs every rule below; `pipec explain RULE` prints the same text as these pages.\n")
	b.WriteString("A rule can be turned off with `--disable RULE` or in `.pipec.yaml` (see [the configuration file](../config.md)).\n\n")
	b.WriteString("| rule | severity | catches |\n|---|---|---|\n")
	for _, r := range rules {
		fmt.Fprintf(&b, "| [%s](%s.md) | %s | %s |\n", r.ID, r.ID, r.Severity, strings.ReplaceAll(summary(r), "|", `\|`))
	}
	return []byte(b.String())
}

// summary is the rule's one-line summary as a sentence.
func summary(r *lint.Rule) string {
	s := strings.TrimSpace(r.Summary)
	if s == "" {
		s = lint.Title(r.Doc)
	}
	return lint.Sentence(s)
}

// body turns the doc text into Markdown: "Bad:" and "Fixed:" become headings
// and each run of lines indented by four spaces becomes a fenced HCL block.
func body(doc string) string {
	lines := strings.Split(strings.Trim(strings.ReplaceAll(doc, "\r\n", "\n"), "\n"), "\n")
	var b strings.Builder
	inCode := false
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		code := strings.HasPrefix(line, "    ") || (inCode && strings.TrimSpace(line) == "" && nextIndented(lines, i))
		switch {
		case code && !inCode:
			b.WriteString("```hcl\n")
			inCode = true
		case !code && inCode:
			b.WriteString("```\n")
			inCode = false
		}
		switch {
		case inCode:
			b.WriteString(strings.TrimPrefix(line, "    "))
		case line == "Bad:":
			b.WriteString("## Bad")
		case line == "Fixed:":
			b.WriteString("## Fixed")
		default:
			b.WriteString(line)
		}
		b.WriteByte('\n')
	}
	if inCode {
		b.WriteString("```\n")
	}
	return b.String()
}

// nextIndented reports whether the next non-blank line after i is indented,
// so a blank line inside an example does not split it in two.
func nextIndented(lines []string, i int) bool {
	for _, l := range lines[i+1:] {
		if strings.TrimSpace(l) != "" {
			return strings.HasPrefix(l, "    ")
		}
	}
	return false
}
