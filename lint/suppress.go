package lint

import (
	"bytes"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/suggest"
	"github.com/pipec/pipec/spec"
)

// ignoreDirective starts a suppression comment.
const ignoreDirective = "pipec:ignore"

// suppression is one `pipec:ignore RULE[,RULE...] reason` comment.
type suppression struct {
	// target is the line whose findings it suppresses.
	target int
	rules  []string
	reason string
	// at is the comment's range, where problems with the comment are reported.
	at   diag.Range
	used []bool // per rule
}

// scanSuppressions finds the suppression comments of a spec's source. A
// comment starts with `//`, or `#` in HCL (in CUE `#` starts a definition), and
// is recognised outside string literals, HCL heredocs and CUE multi-line
// strings. A comment that follows code on its line covers that line; a
// comment alone on its line covers the next line that is not a comment line,
// so several suppressions (and explanations) can stack above one line. A blank
// line ends the stack: the comment then covers the blank line, which is
// nothing.
func scanSuppressions(file string, src []byte) []*suppression {
	if !bytes.Contains(src, []byte(ignoreDirective)) {
		return nil
	}
	syn, _ := spec.SyntaxOf(file)
	hashComments := syn != spec.SyntaxCUE
	var out []*suppression
	var pending []*suppression // own-line comments waiting for their line
	var heredoc string         // the closing marker while inside an HCL heredoc
	inTriple := false          // inside a CUE """ string
	offset := 0
	for n, line := range strings.SplitAfter(string(src), "\n") {
		lineNo := n + 1
		lineStart := offset
		offset += len(line)
		text := strings.TrimRight(line, "\r\n")
		if heredoc != "" {
			if strings.TrimSpace(text) == heredoc {
				heredoc = ""
			}
			continue
		}
		if inTriple {
			if strings.Contains(text, `"""`) {
				inTriple = false
			}
			continue
		}
		start, marker, opens := findComment(text, hashComments)
		switch {
		case opens == `"""`:
			inTriple = true
		case opens != "":
			heredoc = opens
		}
		var s *suppression
		if start >= 0 {
			s = parseSuppression(text[start+len(marker):])
		}
		if s == nil {
			if start < 0 || strings.TrimSpace(text[:start]) != "" {
				for _, p := range pending {
					p.target = lineNo
				}
				pending = pending[:0]
			}
			continue
		}
		col := utf8.RuneCountInString(text[:start]) + 1
		s.at = diag.Range{Filename: file,
			Start: diag.Pos{Line: lineNo, Column: col, Byte: lineStart + start},
			End:   diag.Pos{Line: lineNo, Column: utf8.RuneCountInString(text) + 1, Byte: lineStart + len(text)}}
		out = append(out, s)
		if strings.TrimSpace(text[:start]) != "" {
			s.target = lineNo
			for _, p := range pending {
				p.target = lineNo
			}
			pending = pending[:0]
		} else {
			pending = append(pending, s)
		}
	}
	// Comments at the end of the file cover nothing (line 0).
	return out
}

// findComment returns where a line comment starts outside strings (or -1),
// the comment marker, and the heredoc marker or `"""` when the line opens a
// multi-line string.
func findComment(line string, hash bool) (start int, marker, opens string) {
	inStr := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch {
		case strings.HasPrefix(line[i:], `"""`):
			if !strings.Contains(line[i+3:], `"""`) {
				return -1, "", `"""`
			}
			i = i + 3 + strings.Index(line[i+3:], `"""`) + 2
		case c == '"':
			inStr = true
		case strings.HasPrefix(line[i:], "//"):
			return i, "//", ""
		case c == '#' && hash:
			return i, "#", ""
		case strings.HasPrefix(line[i:], "<<"):
			m := strings.TrimPrefix(line[i+2:], "-")
			end := 0
			for end < len(m) && (m[end] == '_' || m[end] >= 'A' && m[end] <= 'Z' || m[end] >= 'a' && m[end] <= 'z' || m[end] >= '0' && m[end] <= '9') {
				end++
			}
			if end > 0 {
				return -1, "", m[:end]
			}
		}
	}
	return -1, "", ""
}

// parseSuppression reads the text after a comment marker, or returns nil when
// the comment is not a suppression.
func parseSuppression(comment string) *suppression {
	rest, ok := strings.CutPrefix(strings.TrimSpace(comment), ignoreDirective)
	if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
		return nil
	}
	fields := strings.Fields(rest)
	s := &suppression{}
	if len(fields) > 0 {
		for r := range strings.SplitSeq(fields[0], ",") {
			if r != "" {
				s.rules = append(s.rules, r)
			}
		}
		s.reason = strings.Join(fields[1:], " ")
		// A further comment on the line (" // ..." or " # ...") is not part
		// of the reason.
		for _, m := range []string{" //", " #"} {
			if i := strings.Index(" "+s.reason, m); i >= 0 {
				s.reason = strings.TrimSpace(s.reason[:max(i-1, 0)])
			}
		}
	}
	s.used = make([]bool, len(s.rules))
	return s
}

// applySuppressions drops the findings that a suppression comment covers and
// reports comments that suppress nothing, name an unknown rule or give no
// reason. enabled tells which rules ran: a comment naming a disabled rule is
// not reported, since it will matter again when the rule is on.
func applySuppressions(found diag.Diagnostics, file string, src []byte, enabled map[string]bool) diag.Diagnostics {
	sups := scanSuppressions(file, src)
	if len(sups) == 0 {
		return found
	}
	byLine := map[int][]*suppression{}
	for _, s := range sups {
		if s.target > 0 {
			byLine[s.target] = append(byLine[s.target], s)
		}
	}
	kept := found[:0]
	for _, d := range found {
		suppressed := false
		for _, s := range byLine[d.Range.Start.Line] {
			if i := slices.Index(s.rules, d.Rule); i >= 0 {
				s.used[i] = true
				suppressed = true
			}
		}
		if !suppressed {
			kept = append(kept, d)
		}
	}
	report := func(id string, r diag.Range, msg string) {
		if enabled[id] {
			kept = append(kept, diag.Diagnostic{Rule: id, Severity: diag.Warning, Message: msg, Range: r})
		}
	}
	for _, s := range sups {
		if len(s.rules) == 0 {
			report(ruleUnusedSuppression.ID, s.at, "pipec:ignore names no rule: write `pipec:ignore RULE reason`")
			continue
		}
		anyUsed := false
		for i, id := range s.rules {
			r := Lookup(id)
			switch {
			case r == nil:
				report(ruleUnusedSuppression.ID, s.at, "pipec:ignore names unknown rule \""+id+"\""+suggest.Hint(id, IDs()))
			case !r.Reported() || id == ruleUnusedSuppression.ID || id == ruleSuppressionReason.ID:
				report(ruleUnusedSuppression.ID, s.at, "pipec:ignore cannot suppress \""+id+"\": "+unsuppressibleWhy(r))
			case !enabled[id]:
				anyUsed = true // the rule is off; the comment may matter again
			case !s.used[i]:
				where := "the line after this comment"
				if s.target == s.at.Start.Line {
					where = "this line"
				}
				report(ruleUnusedSuppression.ID, s.at, "pipec:ignore "+id+" suppresses nothing: no "+id+" finding on "+where+"; remove the comment")
			default:
				anyUsed = true
			}
		}
		if anyUsed && s.reason == "" {
			report(ruleSuppressionReason.ID, s.at, "pipec:ignore "+strings.Join(s.rules, ",")+" gives no reason: say why the finding does not apply, after the rule id")
		}
	}
	return kept
}

func unsuppressibleWhy(r *Rule) string {
	if !r.Reported() {
		return "the compiler reports it, and a spec with this error has no valid plan"
	}
	return "it reports on suppression comments themselves"
}
