package cuespec

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/token"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/schema"
	"github.com/pipec/pipec/spec"
)

// pos converts a CUE position to a diag position. It reports false for a
// position outside the author's file (in the schema, or none at all).
// CUE counts columns in bytes; diag counts characters.
func (l *cueLoader) pos(p token.Pos) (diag.Pos, bool) {
	if !p.IsValid() || p.File() == nil {
		return diag.Pos{}, false
	}
	if p.Filename() == l.file {
		if off := p.Offset(); off <= len(l.src) {
			line, col := l.lines.place(l.src, off)
			return diag.Pos{Line: line, Column: col, Byte: off}, true
		}
	}
	pp := p.Position()
	if pp.Filename != l.file {
		return diag.Pos{}, false
	}
	off, line, col := pp.Offset, pp.Line, pp.Column
	if line < 1 {
		return diag.Pos{}, false
	}
	start := off - (col - 1)
	if col < 1 || start < 0 || off > len(l.src) {
		return diag.Pos{Line: line, Column: max(col, 1), Byte: off}, true
	}
	return diag.Pos{Line: line, Column: utf8.RuneCount(l.src[start:off]) + 1, Byte: off}, true
}

// lineIndex places byte offsets of one source on lines and columns, as
// token.Pos.Position does for the file CUE parsed from that source (a line
// starts after each newline, the last one excepted) with columns counted
// in characters. The decoder asks for a position of nearly every node, in
// the order of the source, so most offsets are on the line placed last: it
// is kept, with whether it is plain ASCII (a column is then the byte
// count). Not safe for concurrent use.
type lineIndex struct {
	starts     []int // each line's first byte; built on first use
	last       int   // index in starts of the line placed last
	lastEnd    int   // where that line ends (its newline, or the source's end)
	lastASCII  bool
	lastPlaced bool
}

// lineStarts is the lines table CUE's scanner makes of src (token.File's):
// the offset of each line's first byte, a line starting after each newline
// but the last byte.
func lineStarts(src []byte) []int {
	starts := []int{0}
	for i := 0; ; {
		j := bytes.IndexByte(src[i:], '\n')
		if j < 0 || i+j+1 >= len(src) {
			return starts
		}
		i += j + 1
		starts = append(starts, i)
	}
}

// place returns the line (from 1) and column (in characters, from 1) of the
// byte at off in src; off may be len(src).
func (x *lineIndex) place(src []byte, off int) (line, col int) {
	if x.starts == nil {
		x.starts = lineStarts(src)
	}
	if !x.lastPlaced || off < x.starts[x.last] || off > x.lastEnd {
		i, found := slices.BinarySearch(x.starts, off)
		if !found {
			i--
		}
		end := len(src)
		if i+1 < len(x.starts) {
			end = x.starts[i+1] - 1
		}
		x.last, x.lastEnd, x.lastPlaced = i, end, true
		x.lastASCII = true
		for _, b := range src[x.starts[i]:end] {
			if b >= utf8.RuneSelf {
				x.lastASCII = false
				break
			}
		}
	}
	start := x.starts[x.last]
	if x.lastASCII {
		return x.last + 1, off - start + 1
	}
	return x.last + 1, utf8.RuneCount(src[start:off]) + 1
}

// span is the range from start to end; an end outside the file collapses
// onto the start.
func (l *cueLoader) span(start, end token.Pos) (diag.Range, bool) {
	s, ok := l.pos(start)
	if !ok {
		return diag.Range{}, false
	}
	e, ok := l.pos(end)
	if !ok || e.Byte < s.Byte {
		e = s
	}
	return diag.Range{Filename: l.file, Start: s, End: e}, true
}

// nodeRange is the range of a node of the author's file, or the start of the
// file for a node without a position there.
func (l *cueLoader) nodeRange(n ast.Node) diag.Range {
	if n == nil {
		return l.fileStart()
	}
	if r, ok := l.span(n.Pos(), n.End()); ok {
		return r
	}
	return l.fileStart()
}

// cueFieldIndex maps a path of field labels in the author's file to the fields
// declared there (several when a field is written more than once), and a list
// element's path (the list's path, then "#i") to the element. It places what
// has no position of its own: CUE errors positioned only in the schema, and
// values read back from an evaluated (non-plain) file.
type cueFieldIndex struct {
	fields map[string][]*ast.Field
	elems  map[string]ast.Expr
	// ends maps the offset where a node starts to where the smallest node
	// starting there ends, to give an error position its extent.
	ends map[int]int
	// at maps the offset where a field's label or value starts to the
	// field, for every field of the file, those inside comprehensions and
	// pattern constraints included (see producedField).
	at map[int]*ast.Field
}

func (l *cueLoader) index() *cueFieldIndex {
	if l.fields != nil {
		return l.fields
	}
	ix := &cueFieldIndex{fields: map[string][]*ast.Field{}, elems: map[string]ast.Expr{}, ends: map[int]int{}, at: map[int]*ast.Field{}}
	if l.parsed != nil {
		ix.addDecls(nil, l.parsed.Decls)
		ast.Walk(l.parsed, func(n ast.Node) bool {
			s, e := n.Pos(), n.End()
			if !s.IsValid() || !e.IsValid() || s.Filename() != l.file || e.Offset() <= s.Offset() {
				return true
			}
			if old, ok := ix.ends[s.Offset()]; !ok || e.Offset() < old {
				ix.ends[s.Offset()] = e.Offset()
			}
			if f, ok := n.(*ast.Field); ok {
				for _, p := range []token.Pos{f.Label.Pos(), f.Value.Pos()} {
					if _, seen := ix.at[p.Offset()]; p.IsValid() && !seen {
						ix.at[p.Offset()] = f
					}
				}
			}
			return true
		}, nil)
	}
	l.fields = ix
	return ix
}

func pathKey(path []string) string { return strings.Join(path, "\x00") }

func (ix *cueFieldIndex) addDecls(path []string, decls []ast.Decl) {
	for _, d := range decls {
		f, ok := d.(*ast.Field)
		if !ok {
			continue
		}
		name := fieldLabel(f.Label)
		if name == "" {
			continue
		}
		p := append(slices.Clip(path), name)
		k := pathKey(p)
		ix.fields[k] = append(ix.fields[k], f)
		ix.addValue(p, f.Value)
	}
}

func (ix *cueFieldIndex) addValue(path []string, e ast.Expr) {
	switch x := e.(type) {
	case *ast.StructLit:
		ix.addDecls(path, x.Elts)
	case *ast.ListLit:
		for i, el := range x.Elts {
			k := pathKey(append(slices.Clip(path), "#"+strconv.Itoa(i)))
			if _, ok := ix.elems[k]; !ok {
				ix.elems[k] = el
			}
		}
	case *ast.BinaryExpr:
		// `a: #T & {...}`: the literal parts still place their fields.
		ix.addValue(path, x.X)
		ix.addValue(path, x.Y)
	case *ast.ParenExpr:
		ix.addValue(path, x.X)
	}
}

// fieldLabel is the name of any field label that names a field: identifiers
// (definitions and hidden fields included) and string literals.
func fieldLabel(l ast.Label) string {
	if a, ok := l.(*ast.Alias); ok {
		if e, ok := a.Expr.(ast.Label); ok {
			l = e
		}
	}
	if id, ok := l.(*ast.Ident); ok {
		return id.Name
	}
	return plainLabel(l)
}

// fieldAt returns the first field declared at path, walking back to the
// closest declared ancestor when the path itself was not written (a field
// added by a comprehension, a required field left out). It returns nil when
// not even the first label was written.
func (l *cueLoader) fieldAt(path []string) (*ast.Field, []*ast.Field) {
	ix := l.index()
	if len(ix.fields[pathKey(path)]) == 0 {
		if f := l.producedField(path); f != nil {
			return f, []*ast.Field{f}
		}
	}
	for n := len(path); n > 0; n-- {
		if fs := ix.fields[pathKey(path[:n])]; len(fs) > 0 {
			return fs[0], fs
		}
	}
	return nil, nil
}

// producedField finds, for a path the author did not write as such, the
// field that produced it in an evaluated file: the field inside a
// comprehension (`for n in [...] { "load_\(n)": {...} }`) or a pattern
// constraint (`task: [_]: {timeout: ...}`) whose value is the first conjunct,
// in the author's file, of the evaluated value at path. Without it a finding
// about such a field would point at its closest written ancestor, often an
// unrelated field.
func (l *cueLoader) producedField(path []string) *ast.Field {
	if !l.evaluated.Exists() || len(path) == 0 {
		return nil
	}
	sels := make([]cue.Selector, len(path))
	for i, p := range path {
		sels[i] = cue.Str(p)
	}
	v := l.evaluated.LookupPath(cue.MakePath(sels...))
	if !v.Exists() {
		return nil
	}
	_, args := v.Expr()
	ix := l.index()
	for _, c := range append(args, v) {
		p := c.Pos()
		if !p.IsValid() || p.Filename() != l.file {
			continue
		}
		if f := ix.at[p.Offset()]; f != nil {
			return f
		}
	}
	return nil
}

// pathLabelRange is the range of the label of the field at path (or of its
// closest written ancestor), or the start of the file.
func (l *cueLoader) pathLabelRange(path []string) diag.Range {
	if f, _ := l.fieldAt(path); f != nil {
		return l.nodeRange(f.Label)
	}
	return l.fileStart()
}

// pathFieldRange is the range from the label to the end of the value of the
// field at path (or of its closest written ancestor).
func (l *cueLoader) pathFieldRange(path []string) diag.Range {
	if f, _ := l.fieldAt(path); f != nil {
		if r, ok := l.span(f.Label.Pos(), f.Value.End()); ok {
			return r
		}
	}
	return l.fileStart()
}

// pathValueRange is the range of the value of the field at path: the literal
// when the author wrote one there, else the field.
func (l *cueLoader) pathValueRange(path []string) diag.Range {
	ix := l.index()
	fs := ix.fields[pathKey(path)]
	if len(fs) == 0 {
		if f := l.producedField(path); f != nil {
			fs = []*ast.Field{f}
		}
	}
	if len(fs) > 0 {
		if r, ok := l.span(fs[0].Value.Pos(), fs[0].Value.End()); ok {
			return r
		}
	}
	return l.pathFieldRange(path)
}

// pathElemRange is the range of element i of the list at path, or of the
// list's field when the element was not written as such.
func (l *cueLoader) pathElemRange(path []string, i int) diag.Range {
	k := pathKey(append(slices.Clip(path), "#"+strconv.Itoa(i)))
	if el, ok := l.index().elems[k]; ok {
		if r, ok := l.span(el.Pos(), el.End()); ok {
			return r
		}
	}
	return l.pathFieldRange(path)
}

// addCUEErrors turns CUE's errors into diagnostics. rule is RuleSyntax for
// parse errors; "" classifies each error: a conflict with the schema, a field
// the schema does not allow or a required field left out is RuleSchema, any
// other failure to evaluate (the author's own conflicting values, an
// incomplete value) is RuleSyntax. An enumeration's errors become one
// finding, and errors below a misplaced top-level field are dropped; every
// other error is kept (CUE reports each problem once per place).
func (l *cueLoader) addCUEErrors(err error, rule string) {
	errs := cueerrors.Errors(err)
	if len(errs) == 0 {
		l.ds = append(l.ds, diag.Errorf(cmp.Or(rule, spec.RuleSyntax), l.fileStart(), "%v", err))
		return
	}
	// CUE reports a value outside an enumeration as one "empty disjunction"
	// error followed by one conflict per alternative; say it once.
	skip := make([]bool, len(errs))
	first := len(l.ds)
	defer func() { l.ds = append(l.ds[:first], untilOpenString(l.ds[first:])...) }()
	for i, e := range errs {
		if skip[i] || belowMisplaced(e) {
			continue
		}
		d := l.cueDiagnostic(e, rule)
		if format, _ := e.Msg(); strings.Contains(format, "empty disjunction") {
			if merged, used, ok := l.mergeDisjunction(e, errs[i+1:]); ok {
				d = merged
				for j := range used {
					skip[i+1+used[j]] = true
				}
			}
		}
		l.ds = append(l.ds, d)
	}
}

// untilOpenString drops the parse errors that follow a string literal left
// open: the parser reports it at its opener, then stumbles over every line
// after it, and those are not mistakes of their own.
func untilOpenString(ds diag.Diagnostics) diag.Diagnostics {
	open := -1
	for i, d := range ds {
		if d.Rule == spec.RuleSyntax && strings.Contains(d.Message, "literal not terminated") &&
			(open < 0 || d.Range.Start.Byte < ds[open].Range.Start.Byte) {
			open = i
		}
	}
	if open < 0 {
		return ds
	}
	at := ds[open].Range.Start.Byte
	out := ds[:0]
	for _, d := range ds {
		if d.Rule != spec.RuleSyntax || d.Range.Start.Byte <= at {
			out = append(out, d)
		}
	}
	return out
}

// belowMisplaced reports a "field not allowed" error below a top-level field
// other than pipeline: that field is reported as misplaced, and everything
// under it is then not allowed either (one mistake, one finding).
func belowMisplaced(e cueerrors.Error) bool {
	path := trimFilePath(e.Path())
	format, _ := e.Msg()
	return len(path) > 1 && path[0] != spec.KindPipeline && strings.Contains(format, "not allowed")
}

// mergeDisjunction turns an "N errors in empty disjunction" error and the
// conflicts that follow it at the same path ("conflicting values A and X",
// one per alternative A) into one finding, phrased as the HCL loader does:
// X is not allowed; use one of A, B, C. The value common to every conflict
// is the author's.
func (l *cueLoader) mergeDisjunction(head cueerrors.Error, rest []cueerrors.Error) (diag.Diagnostic, []int, bool) {
	path := strings.Join(head.Path(), ".")
	var used []int
	var pairs [][2]string
	// The conflicts follow the disjunction error directly (CUE sorts errors
	// by position, and they all sit in one field): stop at the first error
	// elsewhere, so a spec with thousands of errors is not scanned for each.
	for j, e := range rest {
		if strings.Join(e.Path(), ".") != path {
			break
		}
		format, args := e.Msg()
		if !strings.HasPrefix(format, "conflicting values") || len(args) < 2 {
			continue
		}
		used = append(used, j)
		pairs = append(pairs, [2]string{fmt.Sprint(args[0]), fmt.Sprint(args[1])})
	}
	if len(pairs) < 2 {
		return diag.Diagnostic{}, nil, false
	}
	// The author's value is the one that appears in every pair.
	var mine string
	for _, cand := range pairs[0] {
		all := true
		for _, p := range pairs[1:] {
			if p[0] != cand && p[1] != cand {
				all = false
				break
			}
		}
		if all {
			mine = cand
			break
		}
	}
	if mine == "" {
		return diag.Diagnostic{}, nil, false
	}
	var alts []string
	for _, p := range pairs {
		if p[0] == mine {
			alts = append(alts, p[1])
		} else {
			alts = append(alts, p[0])
		}
	}
	d := l.cueDiagnostic(rest[used[0]], spec.RuleSchema)
	msg := fmt.Sprintf("%s is not allowed; use one of %s", mine, strings.Join(alts, ", "))
	if shown := displayPath(trimFilePath(head.Path())); shown != "" {
		msg = shown + ": " + msg
	}
	d.Message = msg
	return d, used, true
}

// recordCUEPath notes that CUE reported an error at path, see cueCovers.
func (l *cueLoader) recordCUEPath(path []string) {
	if l.cuePaths == nil {
		l.cuePaths, l.cuePrefixes = map[string]bool{}, map[string]bool{}
	}
	l.cuePaths[pathKey(path)] = true
	for n := range len(path) {
		l.cuePrefixes[pathKey(path[:n])] = true
	}
}

// cueCovers reports whether CUE reported an error at path, at one of its
// ancestors or below it.
func (l *cueLoader) cueCovers(path []string) bool {
	if l.cuePaths == nil {
		return false
	}
	for n := len(path); n > 0; n-- {
		if l.cuePaths[pathKey(path[:n])] {
			return true
		}
	}
	return l.cuePrefixes[pathKey(path)]
}

// trimFilePath turns the path of a CUE error into field labels as the
// decoder and the field index spell them: without the "#File" that starts
// the paths of errors found by unifying a whole file with #File, and with
// quoted labels ("0", "my-task") unquoted.
func trimFilePath(path []string) []string {
	if len(path) > 0 && path[0] == "#File" {
		path = path[1:]
	}
	out := make([]string, len(path))
	for i, p := range path {
		out[i] = p
		if strings.HasPrefix(p, `"`) {
			if s, err := literal.Unquote(p); err == nil {
				out[i] = s
			}
		}
	}
	return out
}

// shortArgs shortens the values a CUE message quotes: a conflict with a
// whole pipeline would otherwise print every task of it.
func shortArgs(args []any) []any {
	const limit = 60
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
		s := fmt.Sprint(a)
		if len([]rune(s)) <= limit {
			continue
		}
		switch {
		case strings.HasPrefix(s, "{"):
			out[i] = "{...}"
		case strings.HasPrefix(s, "["):
			out[i] = "[...]"
		default:
			out[i] = string([]rune(s)[:limit]) + "..."
		}
	}
	return out
}

// cueDiagnostic converts one CUE error, placed in the author's file, and
// records its path for the decoder (see cueCovers).
func (l *cueLoader) cueDiagnostic(e cueerrors.Error, rule string) diag.Diagnostic {
	format, args := e.Msg()
	msg := fmt.Sprintf(format, shortArgs(args)...)
	path := trimFilePath(e.Path())
	l.recordCUEPath(path)
	if strings.Contains(format, "not allowed") {
		if l.cueNotAllowed == nil {
			l.cueNotAllowed = map[string]bool{}
		}
		l.cueNotAllowed[pathKey(path)] = true
	}
	positions := append([]token.Pos{e.Position()}, e.InputPositions()...)

	inSchema := false
	var mine []diag.Pos
	for _, p := range positions {
		if p.IsValid() && p.File() != nil && p.Filename() == schema.PipelineFilename {
			inSchema = true
		}
		if dp, ok := l.pos(p); ok {
			mine = append(mine, dp)
		}
	}
	if rule == "" {
		rule = spec.RuleSyntax
		if inSchema || strings.Contains(format, "not allowed") || strings.Contains(format, "required") {
			rule = spec.RuleSchema
		}
	}

	r := l.errorRange(path, mine, strings.Contains(format, "not allowed"))
	if strings.Contains(format, "not allowed") {
		msg += fieldHint(path)
	}
	// A lower bound's hint says what the smallest values mean; exit codes
	// say both ends.
	if f := boundField(path); strings.Contains(msg, "out of bound >") || (strings.Contains(msg, "out of bound") && f == "exit_codes") {
		msg += spec.BoundHint(f)
	}
	if shown := displayPath(path); shown != "" {
		msg = shown + ": " + msg
	}
	return diag.Diagnostic{Rule: rule, Severity: diag.Error, Message: msg, Range: r}
}

// boundField is the field a bound error is about: the last label of its path
// that is not a list index ("exit_codes" in error.e.exit_codes.0).
func boundField(path []string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if _, err := strconv.Atoi(path[i]); err != nil {
			return path[i]
		}
	}
	return ""
}

// errorRange places a CUE error in the author's file. Among the error's own
// positions in the file it prefers the last one inside the field at the
// error's path (the author's value that conflicts, rather than the struct
// that holds it), or the first one for a field that is not allowed (its
// first declaration); without one, the error's first position in the file;
// with none at all (a position only in the schema), the field at the error's
// path or its closest written ancestor.
func (l *cueLoader) errorRange(path []string, mine []diag.Pos, first bool) diag.Range {
	var inField []diag.Pos
	if len(path) > 0 && l.parsed != nil {
		_, fs := l.fieldAt(path)
		for _, p := range mine {
			for _, f := range fs {
				r := l.nodeRange(f)
				if r.Start.Byte <= p.Byte && p.Byte < max(r.End.Byte, r.Start.Byte+1) {
					inField = append(inField, p)
					break
				}
			}
		}
	}
	var at diag.Pos
	switch {
	case len(inField) > 0 && first:
		at = slices.MinFunc(inField, func(a, b diag.Pos) int { return a.Byte - b.Byte })
	case len(inField) > 0:
		at = slices.MaxFunc(inField, func(a, b diag.Pos) int { return a.Byte - b.Byte })
	case len(mine) > 0:
		at = mine[0]
	case len(path) > 0 && l.parsed != nil:
		return l.pathLabelRange(path)
	default:
		return l.fileStart()
	}
	return l.tokenRange(at)
}

// tokenRange extends a position to the end of the node of the author's file
// that starts there (a label or a literal), or to the end of its word.
func (l *cueLoader) tokenRange(at diag.Pos) diag.Range {
	r := diag.Range{Filename: l.file, Start: at, End: at}
	if at.Byte < 0 || at.Byte >= len(l.src) {
		return r
	}
	end := at.Byte
	if e, ok := l.index().ends[at.Byte]; ok && e > end && e <= len(l.src) {
		end = e
	}
	if end == at.Byte {
		for end < len(l.src) && !strings.ContainsRune(" \t\r\n,:{}[]", rune(l.src[end])) {
			end++
		}
	}
	if end == at.Byte {
		return r
	}
	line, col := at.Line, at.Column
	for _, c := range string(l.src[at.Byte:end]) {
		if c == '\n' {
			line, col = line+1, 1
			continue
		}
		col++
	}
	r.End = diag.Pos{Line: line, Column: col, Byte: end}
	return r
}

// displayPath shows a CUE path in a message, relative to the pipeline:
// "task.extract.retry" for pipeline.orders.task.extract.retry.
func displayPath(path []string) string {
	if len(path) >= 2 && path[0] == spec.KindPipeline {
		path = path[2:]
	}
	return strings.Join(path, ".")
}
