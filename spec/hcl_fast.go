package spec

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// fastParser builds the hclsyntax tree of one piece of a pipeline body
// directly from the bytes, for the plain subset of HCL that generated and
// hand-written specs are made of: blocks with quoted labels, attributes whose
// values are ASCII strings without templates (the escapes \n \r \t \" and \\
// allowed), whole or decimal numbers, bools, and lists and one-line maps of
// those, with # and // comments. It gives up on anything else, and the piece
// goes through hclsyntax.ParseConfig instead.
//
// Why: hclsyntax first turns the whole piece into tokens of about 100 bytes
// each, measuring every token in grapheme clusters; on a large spec that token
// slice is over half of everything the load allocates, and the garbage
// collector's work follows. Building the same nodes straight from ASCII bytes
// skips it. The tree must be the one hclsyntax would build, down to the ranges
// the decoder reads (attribute, expression, label and block header ranges);
// TestLoadHCLChunked and FuzzLoadHCL compare the two paths' models and
// findings byte for byte.
type fastParser struct {
	file      string
	src       []byte
	i, end    int
	line      int
	lineStart int
	*fastArena
}

// fastArena holds the nodes of the trees a fastParser builds, in slabs: a
// piece holds thousands of small nodes that all die together once it is
// decoded, and one allocation per 128 of them costs the allocator and the
// collector far less than one each. A goroutine that decodes pieces one after
// another reuses one arena (reuse), so its trees take the memory of one piece
// rather than of all of them: a short lint run never collects garbage, and
// every fresh page it touches costs a page fault.
type fastArena struct {
	attrs   slab[hclsyntax.Attribute]
	blocks  slab[hclsyntax.Block]
	bodies  slab[hclsyntax.Body]
	tmpls   slab[hclsyntax.TemplateExpr]
	lits    slab[hclsyntax.LiteralValueExpr]
	tuples  slab[hclsyntax.TupleConsExpr]
	exprs   slab[hclsyntax.Expression]
	strs    slab[string]
	ranges  slab[hcl.Range]
	scratch []hclsyntax.Expression
}

// reuse zeroes every node handed out, to hand them out again: the caller
// must hold no reference into the trees built so far.
func (a *fastArena) reuse() {
	a.attrs.reuse()
	a.blocks.reuse()
	a.bodies.reuse()
	a.tmpls.reuse()
	a.lits.reuse()
	a.tuples.reuse()
	a.exprs.reuse()
	a.strs.reuse()
	a.ranges.reuse()
	clear(a.scratch[:cap(a.scratch)])
}

// slabChunk is how many elements a slab allocates at a time.
const slabChunk = 128

// slab hands out elements of shared backing arrays.
type slab[T any] struct {
	buf  []T
	used [][]T // chunks filled before buf
	free [][]T // zeroed chunks of slabChunk elements, to fill again
}

// one returns a pointer to a fresh zero element.
func (s *slab[T]) one() *T {
	return &s.many(1)[0]
}

// many returns n fresh zero elements, capped so that appending to them never
// reaches a neighbour.
func (s *slab[T]) many(n int) []T {
	if len(s.buf)+n > cap(s.buf) {
		if cap(s.buf) > 0 {
			s.used = append(s.used, s.buf)
		}
		if k := len(s.free); k > 0 && n <= slabChunk {
			s.buf, s.free = s.free[k-1], s.free[:k-1]
		} else {
			s.buf = make([]T, 0, max(slabChunk, n))
		}
	}
	i := len(s.buf)
	s.buf = s.buf[:i+n]
	return s.buf[i : i+n : i+n]
}

// reuse zeroes the elements handed out and keeps the chunks to fill again.
func (s *slab[T]) reuse() {
	for _, c := range append(s.used, s.buf) {
		if cap(c) == slabChunk {
			clear(c)
			s.free = append(s.free, c[:0])
		}
	}
	s.buf, s.used = nil, s.used[:0]
}

// fastParse parses src[start:end], a run of whole lines beginning on the given
// line, as a body. It reports false when the piece leaves the plain subset.
func fastParse(file string, src []byte, start, end, line int) (*hclsyntax.Body, bool) {
	return new(fastArena).parse(file, src, start, end, line)
}

// parse is fastParse with the nodes taken from a.
func (a *fastArena) parse(file string, src []byte, start, end, line int) (*hclsyntax.Body, bool) {
	p := &fastParser{file: file, src: src, i: start, end: end, line: line, lineStart: start, fastArena: a}
	startPos := p.pos()
	body, ok := p.body(false)
	if !ok {
		return nil, false
	}
	body.SrcRange = hcl.Range{Filename: file, Start: startPos, End: p.pos()}
	body.EndRange = hcl.Range{Filename: file, Start: p.pos(), End: p.pos()}
	return body, true
}

func (p *fastParser) pos() hcl.Pos {
	return hcl.Pos{Line: p.line, Column: p.i - p.lineStart + 1, Byte: p.i}
}

func (p *fastParser) from(start hcl.Pos) hcl.Range {
	return hcl.Range{Filename: p.file, Start: start, End: p.pos()}
}

func (p *fastParser) peek() byte {
	if p.i < p.end {
		return p.src[p.i]
	}
	return 0
}

// peekAt is the byte n bytes ahead, 0 past the end of the piece.
func (p *fastParser) peekAt(n int) byte {
	if p.i+n < p.end {
		return p.src[p.i+n]
	}
	return 0
}

func (p *fastParser) skipSpace() {
	for p.i < p.end && (p.src[p.i] == ' ' || p.src[p.i] == '\t') {
		p.i++
	}
}

// atComment reports whether a line comment starts here.
func (p *fastParser) atComment() bool {
	c := p.peek()
	return c == '#' || (c == '/' && p.i+1 < p.end && p.src[p.i+1] == '/')
}

// eol consumes blanks, an optional line comment and the newline that ends an
// item (or the end of the piece); it reports false if anything else follows.
func (p *fastParser) eol() bool {
	p.skipSpace()
	if p.atComment() {
		for p.i < p.end && p.src[p.i] != '\n' {
			if p.src[p.i] >= 0x80 || p.src[p.i] == '\r' {
				return false
			}
			p.i++
		}
	}
	switch {
	case p.i >= p.end:
		return true
	case p.src[p.i] == '\n':
		p.newline()
		return true
	}
	return false
}

func (p *fastParser) newline() {
	p.i++
	p.line++
	p.lineStart = p.i
}

// skipLines skips blanks, newlines and line comments (inside brackets).
func (p *fastParser) skipLines() bool {
	for {
		p.skipSpace()
		switch {
		case p.atComment():
			if !p.eol() {
				return false
			}
		case p.peek() == '\n':
			p.newline()
		default:
			return true
		}
	}
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func isIdentByte(c byte) bool {
	return isIdentStart(c) || c >= '0' && c <= '9' || c == '-'
}

func (p *fastParser) ident() (string, hcl.Range) {
	start := p.pos()
	for p.i < p.end && isIdentByte(p.src[p.i]) {
		p.i++
	}
	return string(p.src[start.Byte:p.i]), p.from(start)
}

// body parses items up to the end of the piece or, when nested, up to the
// closing brace (left unread).
func (p *fastParser) body(nested bool) (*hclsyntax.Body, bool) {
	body := p.bodies.one()
	body.Attributes = hclsyntax.Attributes{}
	for {
		if !p.skipLines() {
			return nil, false
		}
		if p.i >= p.end {
			return body, !nested
		}
		c := p.src[p.i]
		if c == '}' {
			return body, nested
		}
		if !isIdentStart(c) {
			return nil, false
		}
		name, nameRange := p.ident()
		p.skipSpace()
		if p.peek() == '=' {
			a, ok := p.attribute(name, nameRange)
			if !ok || !p.eol() {
				return nil, false
			}
			if _, dup := body.Attributes[name]; dup {
				return nil, false // hclsyntax reports "Attribute redefined"
			}
			body.Attributes[name] = a
			continue
		}
		b, ok := p.block(name, nameRange)
		if !ok || !p.eol() {
			return nil, false
		}
		body.Blocks = append(body.Blocks, b)
	}
}

// attribute parses "= value" after an attribute name.
func (p *fastParser) attribute(name string, nameRange hcl.Range) (*hclsyntax.Attribute, bool) {
	eqStart := p.pos()
	p.i++
	eq := p.from(eqStart)
	p.skipSpace()
	expr, ok := p.expr()
	if !ok {
		return nil, false
	}
	a := p.attrs.one()
	*a = hclsyntax.Attribute{
		Name:        name,
		Expr:        expr,
		SrcRange:    hcl.RangeBetween(nameRange, expr.Range()),
		NameRange:   nameRange,
		EqualsRange: eq,
	}
	return a, true
}

// block parses the labels and body of a block after its type.
func (p *fastParser) block(typ string, typeRange hcl.Range) (*hclsyntax.Block, bool) {
	b := p.blocks.one()
	b.Type, b.TypeRange = typ, typeRange
	for p.peek() == '"' {
		s, r, ok := p.quoted()
		if !ok {
			return nil, false
		}
		if b.Labels == nil {
			b.Labels, b.LabelRanges = p.strs.many(1)[:0], p.ranges.many(1)[:0]
		}
		b.Labels = append(b.Labels, s)
		b.LabelRanges = append(b.LabelRanges, r)
		p.skipSpace()
	}
	if p.peek() != '{' {
		return nil, false
	}
	oStart := p.pos()
	p.i++
	b.OpenBraceRange = p.from(oStart)
	p.skipSpace()
	var body *hclsyntax.Body
	switch {
	case p.peek() == '}':
		body = p.bodies.one()
		body.Attributes = hclsyntax.Attributes{}
	case p.peek() == '\n' || p.atComment():
		if !p.eol() {
			return nil, false
		}
		var ok bool
		if body, ok = p.body(true); !ok {
			return nil, false
		}
	case isIdentStart(p.peek()):
		// A one-line block holds exactly one attribute.
		name, nameRange := p.ident()
		p.skipSpace()
		if p.peek() != '=' {
			return nil, false
		}
		a, ok := p.attribute(name, nameRange)
		if !ok {
			return nil, false
		}
		p.skipSpace()
		if p.peek() != '}' {
			return nil, false
		}
		body = p.bodies.one()
		body.Attributes = hclsyntax.Attributes{name: a}
	default:
		return nil, false
	}
	cStart := p.pos()
	p.i++
	b.CloseBraceRange = p.from(cStart)
	body.SrcRange = hcl.RangeBetween(b.OpenBraceRange, b.CloseBraceRange)
	body.EndRange = hcl.Range{Filename: p.file, Start: b.CloseBraceRange.End, End: b.CloseBraceRange.End}
	b.Body = body
	return b, true
}

// quoted reads a non-empty quoted string of printable ASCII with no
// interpolation or directive. Its value is its bytes, with the escapes
// \n \r \t \" and \\ replaced as hclsyntax replaces them (a command line
// often holds one); any other escape goes through hclsyntax, which reports the
// invalid ones.
func (p *fastParser) quoted() (string, hcl.Range, bool) {
	start := p.pos()
	p.i++
	var unescaped []byte // nil until the first escape
	from := p.i          // the first byte not yet copied to unescaped
	for p.i < p.end {
		c := p.src[p.i]
		switch {
		case c == '"':
			if p.i == start.Byte+1 {
				return "", hcl.Range{}, false
			}
			var s string
			if unescaped == nil {
				s = string(p.src[from:p.i])
			} else {
				s = string(append(unescaped, p.src[from:p.i]...))
			}
			p.i++
			return s, p.from(start), true
		case c == '\\':
			r, ok := escaped(p.peekAt(1))
			if !ok {
				return "", hcl.Range{}, false
			}
			unescaped = append(append(unescaped, p.src[from:p.i]...), r)
			p.i += 2
			from = p.i
			continue
		case c < 0x20 || c >= 0x7f:
			return "", hcl.Range{}, false
		case (c == '$' || c == '%') && p.peekAt(1) == '{':
			return "", hcl.Range{}, false
		}
		p.i++
	}
	return "", hcl.Range{}, false
}

// escaped is the byte an escape \c in a quoted string stands for, for the
// escapes the fast path takes.
func escaped(c byte) (byte, bool) {
	switch c {
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	case '"', '\\':
		return c, true
	}
	return 0, false
}

// expr parses one value.
func (p *fastParser) expr() (hclsyntax.Expression, bool) {
	c := p.peek()
	switch {
	case c == '"':
		start := p.pos()
		s, r, ok := p.quoted()
		if !ok {
			return nil, false
		}
		inner := hcl.Range{
			Filename: p.file,
			Start:    hcl.Pos{Line: start.Line, Column: start.Column + 1, Byte: start.Byte + 1},
			End:      hcl.Pos{Line: r.End.Line, Column: r.End.Column - 1, Byte: r.End.Byte - 1},
		}
		lit := p.lits.one()
		lit.Val, lit.SrcRange = cty.StringVal(s), inner
		t := p.tmpls.one()
		t.Parts, t.SrcRange = p.exprs.many(1), r
		t.Parts[0] = lit
		return t, true
	case c >= '0' && c <= '9':
		return p.number()
	case c == '[':
		return p.tuple()
	case c == '{':
		return p.object()
	case isIdentStart(c):
		name, r := p.ident()
		switch name {
		case "true", "false":
			lit := p.lits.one()
			lit.Val, lit.SrcRange = cty.BoolVal(name == "true"), r
			return lit, true
		}
	}
	return nil, false
}

// number reads digits with an optional fraction, parsed as hclsyntax does.
func (p *fastParser) number() (hclsyntax.Expression, bool) {
	start := p.pos()
	digits := func() int {
		n := 0
		for p.i < p.end && p.src[p.i] >= '0' && p.src[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	digits()
	if p.peek() == '.' {
		p.i++
		if digits() == 0 {
			return nil, false
		}
	}
	if c := p.peek(); isIdentByte(c) || c == '.' || c >= 0x80 {
		return nil, false
	}
	v, err := cty.ParseNumberVal(string(p.src[start.Byte:p.i]))
	if err != nil {
		return nil, false
	}
	lit := p.lits.one()
	lit.Val, lit.SrcRange = v, p.from(start)
	return lit, true
}

// tuple reads [a, b, ...], possibly over several lines, trailing comma allowed.
func (p *fastParser) tuple() (hclsyntax.Expression, bool) {
	start := p.pos()
	p.i++
	t := p.tuples.one()
	// Elements gather at the end of the scratch list (a nested list gathers
	// after them and gives its space back), then move to the slab.
	mark := len(p.scratch)
	defer func() { p.scratch = p.scratch[:mark] }()
	for {
		if !p.skipLines() {
			return nil, false
		}
		if p.peek() == ']' {
			break
		}
		e, ok := p.expr()
		if !ok {
			return nil, false
		}
		p.scratch = append(p.scratch, e)
		if !p.skipLines() {
			return nil, false
		}
		if p.peek() == ',' {
			p.i++
			continue
		}
		if p.peek() != ']' {
			return nil, false
		}
	}
	if n := len(p.scratch) - mark; n > 0 {
		t.Exprs = p.exprs.many(n)
		copy(t.Exprs, p.scratch[mark:])
	}
	oEnd := hcl.Pos{Line: start.Line, Column: start.Column + 1, Byte: start.Byte + 1}
	t.OpenRange = hcl.Range{Filename: p.file, Start: start, End: oEnd}
	p.i++
	t.SrcRange = p.from(start)
	return t, true
}

// object reads a one-line map { KEY = value, "KEY" = value }.
func (p *fastParser) object() (hclsyntax.Expression, bool) {
	start := p.pos()
	p.i++
	o := &hclsyntax.ObjectConsExpr{}
	for {
		p.skipSpace()
		if p.peek() == '}' {
			break
		}
		var key hclsyntax.Expression
		switch c := p.peek(); {
		case c == '"':
			k, ok := p.expr()
			if !ok {
				return nil, false
			}
			key = k
		case isIdentStart(c):
			name, r := p.ident()
			key = &hclsyntax.ScopeTraversalExpr{
				Traversal: hcl.Traversal{hcl.TraverseRoot{Name: name, SrcRange: r}},
				SrcRange:  r,
			}
		default:
			return nil, false
		}
		p.skipSpace()
		if p.peek() != '=' {
			return nil, false
		}
		p.i++
		p.skipSpace()
		v, ok := p.expr()
		if !ok {
			return nil, false
		}
		o.Items = append(o.Items, hclsyntax.ObjectConsItem{KeyExpr: &hclsyntax.ObjectConsKeyExpr{Wrapped: key}, ValueExpr: v})
		p.skipSpace()
		if p.peek() == ',' {
			p.i++
			continue
		}
		if p.peek() != '}' {
			return nil, false
		}
	}
	oEnd := hcl.Pos{Line: start.Line, Column: start.Column + 1, Byte: start.Byte + 1}
	o.OpenRange = hcl.Range{Filename: p.file, Start: start, End: oEnd}
	p.i++
	o.SrcRange = p.from(start)
	return o, true
}
