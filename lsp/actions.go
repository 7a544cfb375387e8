package lsp

import (
	"bytes"
	"fmt"

	"go.lsp.dev/protocol"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/specfmt"
	"github.com/pipec/pipec/internal/suggest"
	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/spec"
)

// suppressReason is the reason the ignore action writes: a sentence the
// author replaces, phrased so that a comment left as it is still reads as
// an unfinished thought in review.
const suppressReason = "reason: say why this finding does not apply"

// codeAction offers, for the findings in the requested range: the
// did-you-mean fix of a name that is not defined (missing-dependency,
// missing-artifact, and the undefined sink, policy, pool or class a schema
// finding names), and a `pipec:ignore RULE reason` comment above the line.
func (s *Server) codeAction(p *protocol.CodeActionParams) ([]protocol.CodeAction, error) {
	a := s.current(p.TextDocument.URI)
	if a == nil || !a.pipeline {
		return nil, nil
	}
	from, to := a.lines.offset(p.Range.Start), a.lines.offset(p.Range.End)
	var out []protocol.CodeAction
	for _, f := range a.diags {
		r := a.lines.rangeOf(f.Range)
		s, e := a.lines.offset(r.Start), a.lines.offset(r.End)
		if e < from || s > to {
			continue
		}
		ld := a.lspDiagnostic(f)
		if fix, ok := a.didYouMean(f, s, e); ok {
			fix.Diagnostics = []protocol.Diagnostic{ld}
			out = append(out, fix)
		}
		if ign, ok := a.ignore(f, s); ok {
			ign.Diagnostics = []protocol.Diagnostic{ld}
			out = append(out, ign)
		}
	}
	return out, nil
}

func (a *analysis) edit(edits ...protocol.TextEdit) *protocol.WorkspaceEdit {
	return &protocol.WorkspaceEdit{Changes: map[protocol.DocumentURI][]protocol.TextEdit{a.uri: edits}}
}

// didYouMean replaces an undefined name with the closest defined one, the
// same suggestion the finding's message makes.
func (a *analysis) didYouMean(f diag.Diagnostic, s, e int) (protocol.CodeAction, bool) {
	switch f.Rule {
	case compiler.RuleMissingDependency, compiler.RuleMissingArtifact, spec.RuleSchema:
	default:
		return protocol.CodeAction{}, false
	}
	for _, o := range a.syms().occ {
		if o.start < s || o.end > e || o.def || len(a.syms().defs(o.kind, o.name)) > 0 {
			continue
		}
		if o.kind == nameClass && builtinClasses[o.name] != "" {
			continue
		}
		best, ok := suggest.Closest(o.name, a.syms().names(o.kind))
		if !ok {
			continue
		}
		return protocol.CodeAction{
			Title:       fmt.Sprintf("Change %q to %q", o.name, best),
			Kind:        protocol.QuickFix,
			IsPreferred: true,
			Edit:        a.edit(protocol.TextEdit{Range: a.lines.span(o.start, o.end), NewText: best}),
		}, true
	}
	return protocol.CodeAction{}, false
}

// ignore inserts a suppression comment on its own line above the finding's
// line, indented like it; lint then skips the finding there exactly as the
// command line does. Findings of the compiler, and of the rules about
// suppression comments, cannot be suppressed, so they get no action.
func (a *analysis) ignore(f diag.Diagnostic, s int) (protocol.CodeAction, bool) {
	r := lint.Lookup(f.Rule)
	if r == nil || !r.Reported() || f.Rule == "unused-suppression" || f.Rule == "suppression-reason" {
		return protocol.CodeAction{}, false
	}
	line := a.lines.position(s).Line
	start := a.lines.start[line]
	indent := start
	for indent < len(a.src) && (a.src[indent] == ' ' || a.src[indent] == '\t') {
		indent++
	}
	marker := "#"
	if a.syn == spec.SyntaxCUE {
		marker = "//"
	}
	text := fmt.Sprintf("%s%s pipec:ignore %s %s\n", a.src[start:indent], marker, f.Rule, suppressReason)
	at := a.lines.position(start)
	return protocol.CodeAction{
		Title: fmt.Sprintf("Ignore %s on this line (pipec:ignore)", f.Rule),
		Kind:  protocol.QuickFix,
		Edit:  a.edit(protocol.TextEdit{Range: protocol.Range{Start: at, End: at}, NewText: text}),
	}, true
}

// formatting is `pipec fmt` on the editor's text: one edit replacing the
// whole document, or none when it is formatted or does not parse.
func (s *Server) formatting(p *protocol.DocumentFormattingParams) ([]protocol.TextEdit, error) {
	a := s.current(p.TextDocument.URI)
	if a == nil {
		return nil, nil
	}
	out, ds := specfmt.Source(a.path, a.src)
	if ds.HasErrors() || bytes.Equal(out, a.src) {
		return []protocol.TextEdit{}, nil
	}
	return []protocol.TextEdit{{Range: a.lines.span(0, len(a.src)), NewText: string(out)}}, nil
}
