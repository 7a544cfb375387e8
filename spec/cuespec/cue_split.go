package cuespec

import (
	"bytes"
	"slices"
	"sync"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
)

// cuePieceSize is about how much source one parse piece holds: a piece is
// what the language server parses again after an edit inside it
// (ChunkCache), and CUE's parser takes about 100 ns a byte. Where the cuts
// fall depends on the source alone, never on the number of cores, so
// whether a file is parsed in pieces, and what the pieces are, is
// reproducible (layoutCUE).
const cuePieceSize = 16 << 10

// parseCUE parses src as parser.ParseFile(filename, src) does. A big file
// of plain data holding one pipeline struct is cut into runs of whole
// fields (layoutCUE), each parsed on its own on up to procs goroutines, or
// taken from cache when an earlier load parsed the same bytes; their trees
// are then moved into the file (rebase) and their fields put back into the
// pipeline struct: the tree, positions and spacing included, that the whole
// parse gives (TestParsePiecesSameTree). Anything the cut cannot vouch for
// (a piece that does not parse alone or holds more than plain fields, the
// rest of the file not plain data) is parsed whole instead, so a syntax
// error always comes from the whole parse. pieceSize 0 means cuePieceSize;
// a negative one, no pieces. The pieces taken from cache, or parsed, are
// handed back to it by cache.keepPieces once the tree is no longer used.
func parseCUE(filename string, src []byte, procs, pieceSize int, cache *ChunkCache) (*ast.File, []*cuePiece, error) {
	if pieceSize == 0 {
		pieceSize = cuePieceSize
	}
	if pieceSize > 0 && len(src) >= 2*pieceSize {
		if lay, ok := layoutCUE(src, pieceSize); ok {
			if f, pieces := parsePieces(filename, src, lay, procs, cache); f != nil {
				return f, pieces, nil
			}
		}
	}
	f, err := parser.ParseFile(filename, src)
	return f, nil, err
}

// cueLayout is where layoutCUE cuts a file: the offsets of the braces of
// its one top-level struct, the starts of the pieces of that struct's body
// after the first (which starts just after open), and the end of the last.
// A piece starts, and the last ends, where the whitespace before a field
// (or before close) starts: that whitespace is parsed with what follows it,
// so the first token after it gets the spacing (token.RelPos) it has in the
// whole parse.
type cueLayout struct {
	open, close int
	starts      []int
	end         int
}

// layoutCUE scans src cheaply (strings, comments, brackets and the shape of
// plain data) for a file whose only top-level value is a struct (`pipeline:
// NAME: {`) closed on a line of its own, and cuts its body into pieces of
// about size bytes. A cut is made at the start of a line that begins a field
// of that struct and follows a line of code, chosen by the line's own text
// (cutsAt) once the piece holds three quarters of size, or at the first
// such line past four times size: an edit moves the cuts near it only, so
// the pieces after it are the same text as before and the language server
// finds them in cache.
//
// It gives up (false) on anything that is not plain data as isPlainFile
// reads it, or that it does not fully understand: an identifier other than a
// label or true, false and null, any operator but a sign, definitions,
// attributes, multi-line and raw strings, interpolations, code after the
// struct, a body with no cut. The cut is only a proposal: parsePieces checks
// that every piece parses cleanly into fields.
func layoutCUE(src []byte, size int) (cueLayout, bool) {
	lay := cueLayout{open: -1, close: -1}
	n := len(src)
	depth := 0
	next := n + 1      // where the next cut may be, once open is known
	lastCode := 0      // offset just after the last byte of code
	commented := false // a comment since the last byte of code
	lineStart := true  // no code yet on this line
	newline := false   // a newline since the last byte of code
	for i := 0; i < n; i++ {
		c := src[i]
		switch c {
		case ' ', '\t', '\r':
			continue
		case '\n':
			lineStart, newline = true, true
			continue
		}
		first := lineStart
		lineStart = false
		if c == '/' {
			if i+1 >= n || src[i+1] != '/' {
				return lay, false
			}
			for i+1 < n && src[i+1] != '\n' {
				i++
			}
			commented = true
			continue
		}
		if lay.close >= 0 {
			return lay, false // code after the struct
		}
		// A cut: the first code of a line in the body, a field's label,
		// after a line of code with no comment since.
		if first && depth == 1 && i >= next && !commented && isLabelStart(c) && (i >= next+3*size || cutsAt(src[i:])) {
			lay.starts = append(lay.starts, lastCode)
			next = lastCode + size*3/4
		}
		switch {
		case c == '"' || c == '\'':
			if i+2 < n && src[i+1] == c && src[i+2] == c {
				return lay, false // a multi-line string
			}
			j := i + 1
			for ; j < n && src[j] != c; j++ {
				switch src[j] {
				case '\\':
					if j+1 < n && src[j+1] == '(' {
						return lay, false // an interpolation
					}
					j++
				case '\n':
					return lay, false
				}
			}
			if j >= n {
				return lay, false
			}
			i = j
		case c >= '0' && c <= '9':
			for i+1 < n && isNumberByte(src[i+1]) {
				i++
			}
		case isLabelStart(c):
			j := i
			for j+1 < n && isIdentByte(src[j+1]) {
				j++
			}
			k := j + 1
			for k < n && (src[k] == ' ' || src[k] == '\t') {
				k++
			}
			if (k >= n || src[k] != ':') && !isPlainWord(src[i:j+1]) {
				return lay, false // a reference, a keyword, a type
			}
			i = j
		case c == '{' || c == '[':
			if depth == 0 {
				if c != '{' || lay.open >= 0 {
					return lay, false
				}
				lay.open = i
				next = i + 1 + size*3/4
			}
			depth++
		case c == '}' || c == ']':
			if depth == 0 {
				return lay, false
			}
			depth--
			if depth == 0 {
				if c != '}' || commented || !newline {
					return lay, false // the closing brace's spacing would differ in the head
				}
				lay.close, lay.end = i, lastCode
			}
		case c == ':' || c == ',' || c == '+' || c == '-' || c == '.':
		default:
			return lay, false
		}
		lastCode, commented, newline = i+1, false, false
	}
	if lay.close < 0 || len(lay.starts) == 0 {
		return lay, false
	}
	return lay, true
}

// cutsAt decides by the text of a line (its first 64 bytes) whether a
// piece may end before it: one line in 16, so a piece is three quarters of
// cuePieceSize and 16 fields more on average. FNV-1a spreads labels that
// differ in a digit.
func cutsAt(line []byte) bool {
	h := uint32(2166136261)
	for i, c := range line {
		if c == '\n' || i == 64 {
			break
		}
		h = (h ^ uint32(c)) * 16777619
	}
	return h>>28 == 0
}

func isLabelStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isIdentByte(c byte) bool {
	return isLabelStart(c) || c >= '0' && c <= '9' || c == '_' || c == '$'
}

// isNumberByte: digits, letters (0x1F, 1e9, 1Ki), separators and the point.
func isNumberByte(c byte) bool { return isIdentByte(c) || c == '.' }

// isPlainWord: the identifiers that are literals in plain data.
func isPlainWord(w []byte) bool {
	return string(w) == "true" || string(w) == "false" || string(w) == "null"
}

// cuePiece is one parsed run of fields. Its positions are in file, the
// piece's bytes starting at offset from there: its own file (from 0) when
// just parsed, the file it was last moved into otherwise.
type cuePiece struct {
	text  string
	decls []ast.Decl
	file  *token.File
	from  int
	kept  uint64 // when the cache was given it last (ChunkCache.kept)
}

// parsePieces parses the pieces of lay (those the cache does not hold) on up
// to procs goroutines and puts the tree back together; nil when a piece is
// not plain fields or the rest of the file not plain data. It returns the
// pieces that parsed, for the cache.
func parsePieces(filename string, src []byte, lay cueLayout, procs int, cache *ChunkCache) (*ast.File, []*cuePiece) {
	type span struct{ from, to int }
	spans := make([]span, 0, len(lay.starts)+1)
	from := lay.open + 1
	for _, s := range lay.starts {
		spans = append(spans, span{from, s})
		from = s
	}
	spans = append(spans, span{from, lay.end})
	pieces := make([]*cuePiece, len(spans))
	// The head is the file with its body blanked out, bar the whitespace
	// before the closing brace, which gives that brace its spacing. Every
	// piece is moved into its file.
	var head *ast.File
	jobs := []func(){func() { head = parseHead(filename, src, lay) }}
	for i, s := range spans {
		text := src[s.from:s.to]
		if pieces[i] = cache.takePiece(text); pieces[i] == nil {
			jobs = append(jobs, func() { pieces[i] = parsePiece(filename, text) })
		}
	}
	if r := runAll(procs, jobs); r != nil {
		panic(r)
	}
	parsed := slices.DeleteFunc(slices.Clone(pieces), func(p *cuePiece) bool { return p == nil })
	if head == nil || len(parsed) < len(pieces) {
		return nil, parsed
	}
	var body *ast.StructLit
	ast.Walk(head, func(n ast.Node) bool {
		if s, isStruct := n.(*ast.StructLit); isStruct && s.Lbrace.IsValid() && s.Lbrace.Offset() == lay.open {
			body = s
		}
		return body == nil
	}, nil)
	if body == nil || len(body.Elts) != 0 {
		return nil, parsed
	}
	file := head.Decls[0].Pos().File()
	// Moving a tree writes its positions, so each piece is moved by one
	// goroutine, and pieces taken from cache are this load's alone.
	moved := make([]bool, len(pieces))
	jobs = jobs[:0]
	for i, p := range pieces {
		jobs = append(jobs, func() { moved[i] = p.moveTo(file, spans[i].from) })
	}
	if r := runAll(procs, jobs); r != nil {
		panic(r)
	}
	if slices.Contains(moved, false) {
		return nil, nil // a tree half moved is no use to anyone
	}
	n := 0
	for _, p := range pieces {
		n += len(p.decls)
	}
	body.Elts = make([]ast.Decl, 0, n)
	for _, p := range pieces {
		body.Elts = append(body.Elts, p.decls...)
	}
	return head, pieces
}

// parseHead parses the file with the body of its pipeline struct blanked
// out; nil when that does not parse or is not plain data. Blanked without
// newlines (the scanner would count them into the closing brace's
// spacing), it gets the file's lines after the parse.
func parseHead(filename string, src []byte, lay cueLayout) *ast.File {
	text := bytes.Clone(src)
	for i := lay.open + 1; i < lay.end; i++ {
		text[i] = ' '
	}
	f, err := parser.ParseFile(filename, text)
	if err != nil || len(f.Decls) == 0 || !isPlainFile(f) {
		return nil
	}
	if !f.Decls[0].Pos().File().SetLines(lineStarts(src)) {
		return nil
	}
	return f
}

// parsePiece parses one run of fields on its own; nil when it is not plain
// fields.
func parsePiece(filename string, text []byte) *cuePiece {
	f, err := parser.ParseFile(filename, text)
	if err != nil || len(f.Decls) == 0 || !plainFields(f.Decls) {
		return nil
	}
	return &cuePiece{text: string(text), decls: f.Decls, file: f.Decls[0].Pos().File()}
}

// runAll runs jobs on up to procs goroutines and returns when all are done.
// A job that panics does not end the process (a panic on a goroutine of its
// own would): the first panic's value is returned, for the caller to raise
// where the loader recovers it (LoadCUECached), and the jobs after it on
// that goroutine still run.
func runAll(procs int, jobs []func()) (panicked any) {
	next := make(chan func())
	var wg sync.WaitGroup
	var once sync.Once
	run := func(job func()) {
		defer func() {
			if r := recover(); r != nil {
				once.Do(func() { panicked = r })
			}
		}()
		job()
	}
	for range min(procs, len(jobs)) {
		wg.Go(func() {
			for job := range next {
				run(job)
			}
		})
	}
	for _, job := range jobs {
		next <- job
	}
	close(next)
	wg.Wait()
	return panicked
}

// plainFields reports whether decls are plain fields only.
func plainFields(decls []ast.Decl) bool {
	for _, d := range decls {
		if fd, ok := d.(*ast.Field); !ok || !isPlainField(fd) {
			return false
		}
	}
	return true
}

// moveTo moves the piece's positions into file, its bytes starting at from
// there, keeping their spacing and flags. It reports false for a node that
// plain data does not have.
func (p *cuePiece) moveTo(file *token.File, from int) bool {
	m := mover{from: p.file, to: file, by: from - p.from}
	for _, d := range p.decls {
		if !m.node(d) {
			return false
		}
	}
	p.file, p.from = file, from
	return true
}

// mover rewrites positions of one file (from) into another (to), by bytes
// further on.
type mover struct {
	from, to *token.File
	by       int
}

func (m mover) pos(p *token.Pos) {
	if p.File() != m.from {
		return // no position in the source (a relative one only)
	}
	*p = m.to.Pos(p.Offset()+m.by, p.RelPos()).WithComma(p.HasComma()).WithScanned(p.Scanned())
}

func (m mover) node(n ast.Node) bool {
	switch x := n.(type) {
	case *ast.Field:
		m.pos(&x.TokenPos)
		for _, a := range x.Attrs {
			m.pos(&a.At)
		}
		return m.node(x.Label) && m.node(x.Value)
	case *ast.Ident:
		m.pos(&x.NamePos)
	case *ast.BasicLit:
		m.pos(&x.ValuePos)
	case *ast.UnaryExpr:
		m.pos(&x.OpPos)
		return m.node(x.X)
	case *ast.StructLit:
		m.pos(&x.Lbrace)
		m.pos(&x.Rbrace)
		for _, d := range x.Elts {
			if !m.node(d) {
				return false
			}
		}
	case *ast.ListLit:
		m.pos(&x.Lbrack)
		m.pos(&x.Rbrack)
		for _, e := range x.Elts {
			if !m.node(e) {
				return false
			}
		}
	default:
		return false
	}
	return true
}
