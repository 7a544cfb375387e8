package lsp

import (
	"bytes"
	"cmp"
	"regexp"
	"slices"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
)

// occurrenceAt returns the analysis and the name under a position.
func (s *Server) occurrenceAt(p protocol.TextDocumentPositionParams) (*analysis, *occurrence) {
	a := s.current(p.TextDocument.URI)
	if a == nil || !a.pipeline {
		return a, nil
	}
	return a, a.syms().at(a.lines.offset(p.Position))
}

func (a *analysis) location(u protocol.DocumentURI, o occurrence) protocol.Location {
	return protocol.Location{URI: u, Range: a.lines.span(o.start, o.end)}
}

// definition goes from a reference to what defines the name: a task's label,
// the output of the task producing an artifact, a sink's, policy's, pool's
// or error class's label. On a definition it stays there.
func (s *Server) definition(p *protocol.DefinitionParams) ([]protocol.Location, error) {
	a, o := s.occurrenceAt(p.TextDocumentPositionParams)
	if o == nil {
		return nil, nil
	}
	var out []protocol.Location
	for _, d := range a.syms().defs(o.kind, o.name) {
		out = append(out, a.location(p.TextDocument.URI, d))
	}
	return out, nil
}

// references lists every place the name under the cursor is written.
func (s *Server) references(p *protocol.ReferenceParams) ([]protocol.Location, error) {
	a, o := s.occurrenceAt(p.TextDocumentPositionParams)
	if o == nil {
		return nil, nil
	}
	var out []protocol.Location
	for _, r := range a.syms().all(o.kind, o.name, p.Context.IncludeDeclaration) {
		out = append(out, a.location(p.TextDocument.URI, r))
	}
	return out, nil
}

func (s *Server) prepareRename(p *protocol.PrepareRenameParams) (*protocol.Range, error) {
	a, o := s.occurrenceAt(p.TextDocumentPositionParams)
	if o == nil {
		return nil, nil
	}
	r := a.lines.span(o.start, o.end)
	return &r, nil
}

// cueIdent is a CUE label that needs no quotes (and is not a keyword-like
// built-in that would change meaning).
var cueIdent = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// rename renames a name everywhere in the file: its definition and every
// reference. The new name must be a valid element name. In CUE, a label
// that becomes a name with '-' gets quotes.
func (s *Server) rename(p *protocol.RenameParams) (*protocol.WorkspaceEdit, error) {
	a, o := s.occurrenceAt(p.TextDocumentPositionParams)
	if o == nil {
		return nil, nil
	}
	if !spec.ValidName(p.NewName) {
		return nil, jsonrpc2.NewError(jsonrpc2.InvalidParams, spec.NameError(o.kind, p.NewName))
	}
	var edits []protocol.TextEdit
	for _, r := range a.syms().all(o.kind, o.name, true) {
		text := p.NewName
		if a.syn == spec.SyntaxCUE && r.def && o.kind != nameArtifact && !quoted(a.src, r.start, r.end) && !cueIdent.MatchString(text) {
			text = `"` + text + `"`
		}
		edits = append(edits, protocol.TextEdit{Range: a.lines.span(r.start, r.end), NewText: text})
	}
	return &protocol.WorkspaceEdit{Changes: map[protocol.DocumentURI][]protocol.TextEdit{p.TextDocument.URI: edits}}, nil
}

// quoted reports whether the name at [start, end) is inside quotes.
func quoted(src []byte, start, end int) bool {
	return start > 0 && end < len(src) && src[start-1] == '"' && src[end] == '"'
}

// documentSymbol is the outline: the pipeline with its pools, error classes,
// retry policies, tasks, checks, sinks and publishes, in file order.
func (s *Server) documentSymbol(p *protocol.DocumentSymbolParams) ([]protocol.DocumentSymbol, error) {
	a := s.current(p.TextDocument.URI)
	if a == nil || a.spec == nil {
		return nil, nil
	}
	sp := a.spec
	var children []protocol.DocumentSymbol
	add := func(kind protocol.SymbolKind, detail string, n *spec.Named) {
		if n.NameRange.Start.Line == 0 {
			return
		}
		sel := a.nameSpan(n.Name, n.NameRange)
		children = append(children, protocol.DocumentSymbol{Name: n.Name, Detail: detail, Kind: kind,
			Range: a.extent(n.Range, n.Attrs, sel), SelectionRange: sel})
	}
	for i := range sp.Pools {
		add(protocol.SymbolKindNamespace, "pool", &sp.Pools[i].Named)
	}
	for i := range sp.Errors {
		add(protocol.SymbolKindEnumMember, "error class", &sp.Errors[i].Named)
	}
	for i := range sp.Retries {
		add(protocol.SymbolKindObject, "retry policy", &sp.Retries[i].Named)
	}
	for i := range sp.Tasks {
		add(protocol.SymbolKindFunction, "task", &sp.Tasks[i].Named)
	}
	for i := range sp.Checks {
		add(protocol.SymbolKindBoolean, "check", &sp.Checks[i].Named)
	}
	for i := range sp.Sinks {
		add(protocol.SymbolKindInterface, "sink", &sp.Sinks[i].Named)
	}
	for i := range sp.Publishes {
		add(protocol.SymbolKindEvent, "publish", &sp.Publishes[i].Named)
	}
	sortSymbols(children)
	sel := a.nameSpan(sp.Name, sp.NameRange)
	root := protocol.DocumentSymbol{Name: sp.Name, Detail: "pipeline", Kind: protocol.SymbolKindModule,
		Range: a.extent(sp.Range, sp.Attrs, sel), SelectionRange: sel, Children: children}
	for _, c := range children {
		root.Range = union(root.Range, c.Range)
	}
	return []protocol.DocumentSymbol{root}, nil
}

// nameSpan is the range of a name inside its label's range (without the
// quotes of an HCL label).
func (a *analysis) nameSpan(name string, r diag.Range) protocol.Range {
	lr := a.lines.rangeOf(r)
	s, e := a.lines.offset(lr.Start), a.lines.offset(lr.End)
	if i := bytes.Index(a.src[s:e], []byte(name)); i >= 0 && name != "" {
		return a.lines.span(s+i, s+i+len(name))
	}
	return lr
}

// extent is the range an element covers: its header and every attribute
// the author wrote (the model has no range for a closing brace).
func (a *analysis) extent(head diag.Range, attrs spec.Attrs, sel protocol.Range) protocol.Range {
	r := union(a.lines.rangeOf(head), sel)
	for _, ar := range attrs.Ranges {
		r = union(r, a.lines.rangeOf(ar))
	}
	return r
}

func before(p, q protocol.Position) bool {
	return p.Line < q.Line || (p.Line == q.Line && p.Character < q.Character)
}

func union(r, q protocol.Range) protocol.Range {
	if before(q.Start, r.Start) {
		r.Start = q.Start
	}
	if before(r.End, q.End) {
		r.End = q.End
	}
	return r
}

func sortSymbols(s []protocol.DocumentSymbol) {
	slices.SortStableFunc(s, func(a, b protocol.DocumentSymbol) int {
		return cmp.Or(cmp.Compare(a.SelectionRange.Start.Line, b.SelectionRange.Start.Line),
			cmp.Compare(a.SelectionRange.Start.Character, b.SelectionRange.Start.Character))
	})
}
