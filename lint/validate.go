package lint

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

var validID = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

// Validate refuses a rule set that would let docs rot or ids clash: every rule
// needs a slug id (lower-case words joined by '-'), unique in the set, and a
// doc that starts with a one-line summary and a blank line and has a "Bad:"
// and a "Fixed:" example, in that order.
func Validate(rules []*Rule) error {
	var errs []error
	seen := map[string]bool{}
	for _, r := range rules {
		if !validID.MatchString(r.ID) {
			errs = append(errs, fmt.Errorf("rule %q: id must be lower-case words joined by '-'", r.ID))
		}
		if seen[r.ID] {
			errs = append(errs, fmt.Errorf("rule %q: declared twice", r.ID))
		}
		seen[r.ID] = true
		doc := strings.TrimSpace(r.Doc)
		if doc == "" {
			errs = append(errs, fmt.Errorf("rule %q: empty doc", r.ID))
			continue
		}
		if first, rest, _ := strings.Cut(doc, "\n"); strings.TrimSpace(first) == "" || !strings.HasPrefix(rest, "\n") {
			errs = append(errs, fmt.Errorf("rule %q: the doc must start with a one-line summary followed by a blank line", r.ID))
		}
		if r.Summary != "" && r.Summary != Title(r.Doc) {
			errs = append(errs, fmt.Errorf("rule %q: summary %q is not the doc's first line", r.ID, r.Summary))
		}
		bad, fixed := strings.Index(doc, "\nBad:\n"), strings.Index(doc, "\nFixed:\n")
		if bad < 0 || fixed < bad {
			errs = append(errs, fmt.Errorf("rule %q: doc needs a \"Bad:\" example followed by a \"Fixed:\" example", r.ID))
		}
	}
	return errors.Join(errs...)
}

// Examples returns the bad and fixed examples of a rule's doc, unindented.
func Examples(r *Rule) (bad, fixed string) {
	doc := r.Doc
	_, rest, ok := strings.Cut(doc, "\nBad:\n")
	if !ok {
		return "", ""
	}
	bad, fixed, _ = strings.Cut(rest, "\nFixed:\n")
	return unindent(bad), unindent(fixed)
}

func unindent(s string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(strings.Trim(s, "\n"), "\n") {
		b.WriteString(strings.TrimPrefix(line, "    "))
		b.WriteByte('\n')
	}
	return b.String()
}
