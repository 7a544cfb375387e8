package spec

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/pipec/pipec/diag"
)

// hclChunkSize is the size of the pieces a large pipeline body is cut into, so
// that its blocks are parsed and decoded on every core. The pieces depend only
// on the source, never on the number of cores, so results are reproducible.
const hclChunkSize = 32 << 10

// hclLayout is where a file holding one multi-line pipeline block can be cut:
// the header (the file up to the end of the line that opens the pipeline,
// closed with "}" so that it parses alone) and pieces of the pipeline body,
// each a run of whole lines holding whole items.
type hclLayout struct {
	header []byte
	pieces []hclPiece
}

// hclPiece is the byte range [start, end) of one piece; it starts a line.
// tasks counts its lines that open a task block: loadChunked decodes the
// pieces' tasks into one array, each piece into its own window, so merging
// them copies nothing.
type hclPiece struct {
	start, end, line int
	tasks            int
}

// scanFrame is one nesting level of the layout scanner: an expression context
// (the file itself, or a template interpolation) counting its open brackets,
// or a quoted string.
type scanFrame struct {
	str   bool
	depth int
}

// layoutHCL scans src cheaply (strings, comments and bracket nesting only) to
// find item boundaries inside the single top-level pipeline block. It gives up
// (false) on anything it does not fully understand: a heredoc, a second
// top-level block, text after the pipeline, a single-line pipeline block. The
// cut is only a proposal: loadChunked checks that every piece parses cleanly
// and falls back to the plain parse otherwise.
func layoutHCL(src []byte, chunkSize int) (hclLayout, bool) {
	var (
		lay       hclLayout
		stack     = []scanFrame{{}}
		line      = 1
		lineStart = 0
		bodyStart = -1 // offset of the first line of the pipeline body
		needNL    = false
		closed    = false
		last      = -1 // start of the current piece
		lastLine  = 0
		tasks     = 0 // lines opening a task block in the current piece
	)
	n := len(src)
	for i := 0; i < n; i++ {
		top := &stack[len(stack)-1]
		// Most bytes mean nothing to the scan: skip them in a tight loop
		// (a byte at a time through the switches below was the whole
		// layout's cost). Before the body opens and after it closes every
		// byte counts.
		switch {
		case top.str:
			i = skipPlain(src, i, strSpecialLo, strSpecialHi)
		case !closed && !needNL:
			i = skipPlain(src, i, codeSpecialLo, codeSpecialHi)
		}
		if i >= n {
			break
		}
		c := src[i]
		if top.str {
			switch c {
			case '\\':
				i++
			case '"':
				stack = stack[:len(stack)-1]
			case '\n':
				return lay, false // a newline in a quoted string: not HCL
			case '$', '%':
				if i+1 < n && src[i+1] == c && i+2 < n && src[i+2] == '{' {
					i += 2 // $${ and %%{ are escapes
				} else if i+1 < n && src[i+1] == '{' {
					i++
					stack = append(stack, scanFrame{})
				}
			}
			continue
		}
		bottom := len(stack) == 1
		if closed && bottom && c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '#' && c != '/' {
			return lay, false // text after the pipeline block
		}
		if needNL && c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '#' && c != '/' {
			return lay, false // a single-line pipeline block
		}
		switch c {
		case '\n':
			line++
			lineStart = i + 1
			if !bottom {
				continue
			}
			if needNL {
				needNL = false
				bodyStart = i + 1
				last, lastLine = i+1, line
			} else if top.depth == 1 && bodyStart >= 0 && i+1-last >= chunkSize {
				lay.pieces = append(lay.pieces, hclPiece{start: last, end: i + 1, line: lastLine, tasks: tasks})
				last, lastLine, tasks = i+1, line, 0
			}
		case '#':
			for i+1 < n && src[i+1] != '\n' {
				i++
			}
		case '/':
			switch {
			case i+1 < n && src[i+1] == '/':
				for i+1 < n && src[i+1] != '\n' {
					i++
				}
			case i+1 < n && src[i+1] == '*':
				i += 2
				for i+1 < n && !(src[i] == '*' && src[i+1] == '/') {
					if src[i] == '\n' {
						if needNL {
							return lay, false
						}
						line++
						lineStart = i + 1
					}
					i++
				}
				if i+1 >= n {
					return lay, false
				}
				i++
			default:
				if closed || needNL {
					return lay, false
				}
			}
		case '"':
			stack = append(stack, scanFrame{str: true})
		case '<':
			if i+1 < n && src[i+1] == '<' {
				return lay, false // a heredoc
			}
		case '{', '[', '(':
			if bottom && top.depth == 0 {
				if c != '{' || bodyStart >= 0 {
					return lay, false
				}
				needNL = true
			}
			if bottom && top.depth == 1 && c == '{' && opensTask(src[lineStart:i]) {
				tasks++
			}
			top.depth++
		case '}', ']', ')':
			if top.depth == 0 {
				if bottom || c != '}' {
					return lay, false
				}
				stack = stack[:len(stack)-1] // end of an interpolation
				continue
			}
			top.depth--
			if bottom && top.depth == 0 {
				// The pipeline's closing brace is in no piece, so no parse
				// would see a mismatch there: check it here.
				if bodyStart < 0 || c != '}' {
					return lay, false
				}
				for _, b := range src[lineStart:i] {
					if b != ' ' && b != '\t' {
						return lay, false
					}
				}
				if i > last {
					lay.pieces = append(lay.pieces, hclPiece{start: last, end: i, line: lastLine, tasks: tasks})
				}
				closed = true
			}
		}
	}
	if !closed || len(stack) != 1 || len(lay.pieces) < 2 {
		return lay, false
	}
	lay.header = append(src[:bodyStart:bodyStart], "}\n"...)
	return lay, true
}

// opensTask reports whether a line of the pipeline body, up to the brace
// that opens a block, opens a task block. It is a guess (a block with a
// comment before its type is missed), which the decoder checks.
func opensTask(line []byte) bool {
	rest, ok := bytes.CutPrefix(bytes.TrimLeft(line, " \t"), []byte("task"))
	return ok && len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t' || rest[0] == '"')
}

// The bytes layoutHCL acts on, as bit sets of ASCII: in code (newlines,
// comments, strings, heredocs, brackets) and in quoted strings (escapes, the
// closing quote, newlines, template openers).
const (
	codeSpecialLo = 1<<'\n' | 1<<'#' | 1<<'/' | 1<<'"' | 1<<'<' | 1<<'(' | 1<<')'
	codeSpecialHi = 1<<('['-64) | 1<<(']'-64) | 1<<('{'-64) | 1<<('}'-64)
	strSpecialLo  = 1<<'\n' | 1<<'"' | 1<<'$' | 1<<'%'
	strSpecialHi  = 1 << ('\\' - 64)
)

// skipPlain returns the offset of the first byte at or after i that is in
// the set (lo, hi), or len(src).
func skipPlain(src []byte, i int, lo, hi uint64) int {
	for ; i < len(src); i++ {
		c := src[i]
		if c < 64 && lo>>c&1 != 0 || c >= 64 && c < 128 && hi>>(c-64)&1 != 0 {
			return i
		}
	}
	return i
}

// loadChunked parses and decodes the pieces of lay concurrently and merges
// them. It reports false, and the caller loads the file in one piece, when a
// piece does not parse, sets an unknown pipeline attribute, or sets one
// another piece sets too: hcl's "did you mean" for an unknown attribute
// depends on which attributes the same body defines, and a piece holds only
// part of the pipeline body (see also setsAttrTwice). Every other finding is
// the same whatever the cut (FuzzLoadHCL checks it), so a large spec with a
// schema error is not parsed twice.
func loadChunked(filename string, src []byte, lay hclLayout) (*Pipeline, diag.Diagnostics, bool) {
	head := &hclLoader{file: filename}
	hbody, syntaxErr := head.parse(lay.header, hcl.Pos{Line: 1, Column: 1})
	if syntaxErr || len(head.ds) > 0 || !cutsPipeline(hbody) {
		return nil, nil, false
	}
	parts := make([]*bodyPart, len(lay.pieces))
	head.taskRoom = make([]Task, 0, taskCount(lay.pieces))
	found := make([]diag.Diagnostics, len(lay.pieces))
	var (
		next   atomic.Int64
		failed atomic.Bool
		wg     sync.WaitGroup
	)
	workers := min(runtime.GOMAXPROCS(0), len(lay.pieces))
	for range workers {
		wg.Go(func() {
			var arena fastArena
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(lay.pieces) {
					return
				}
				pc := lay.pieces[i]
				l := &hclLoader{file: filename, taskRoom: taskWindow(head.taskRoom, lay.pieces, i)}
				body, ok := arena.parse(filename, src, pc.start, pc.end, pc.line)
				if !ok {
					var syntaxErr bool
					body, syntaxErr = l.parse(src[pc.start:pc.end], hcl.Pos{Line: pc.line, Column: 1, Byte: pc.start})
					if syntaxErr {
						failed.Store(true)
						return
					}
				}
				parts[i] = l.decodePipelineBody(body)
				arena.reuse() // the model holds nothing of the tree
				if parts[i].unknownAttr {
					failed.Store(true)
					return
				}
				found[i] = l.ds
			}
		})
	}
	wg.Wait()
	if failed.Load() || setsAttrTwice(parts) {
		return nil, nil, false
	}
	p := head.decodeFile(hbody, parts)
	var ds diag.Diagnostics
	for _, f := range found {
		ds = append(ds, f...)
	}
	return p, append(ds, head.ds...), true
}

// setsAttrTwice reports whether two pieces set one pipeline attribute. The
// one-piece parse reports the second as redefined and reads nothing of its
// value, while the piece that holds it cannot know it is a second and judges
// the value.
func setsAttrTwice(parts []*bodyPart) bool {
	set := map[string]bool{}
	for _, part := range parts {
		for _, pa := range part.attrs {
			if set[pa.name] {
				return true
			}
			set[pa.name] = true
		}
	}
	return false
}

// taskCount is how many tasks the layout found.
func taskCount(pieces []hclPiece) int {
	n := 0
	for _, pc := range pieces {
		n += pc.tasks
	}
	return n
}

// taskWindow is the part of room for the tasks of piece i: empty, with room
// for as many as the layout found, and capped, so that appending more never
// reaches the next piece's.
func taskWindow(room []Task, pieces []hclPiece, i int) []Task {
	start := taskCount(pieces[:i])
	return room[start : start : start+pieces[i].tasks]
}

// loadTolerant loads a file with syntax errors item by item: each item of the
// pipeline body (a block, an attribute) is parsed on its own, so an error in
// one neither hides the errors of the others (the hcl parser reports little
// once it is recovering from an error) nor makes their content unreadable.
// Items that do not parse give their syntax findings only (what the parser
// recovered of them is still decoded, quietly); the others are decoded and
// checked as usual. It reports false when the errors are not
// inside items (the header, or brackets that span items), and the caller
// reports the whole-file parse instead.
func loadTolerant(filename string, src []byte, lay hclLayout) (*Pipeline, diag.Diagnostics, bool) {
	head := &hclLoader{file: filename}
	hbody, syntaxErr := head.parse(lay.header, hcl.Pos{Line: 1, Column: 1})
	if syntaxErr || !cutsPipeline(hbody) {
		return nil, nil, false
	}
	var (
		parts  []*bodyPart
		ds     diag.Diagnostics
		broken bool
	)
	for _, pc := range lay.pieces {
		l := &hclLoader{file: filename}
		body, syntaxErr := l.parse(src[pc.start:pc.end], hcl.Pos{Line: pc.line, Column: 1, Byte: pc.start})
		if syntaxErr {
			// Keep what the parser recovered in the model, so that later
			// stages see the item, but report nothing about its shape.
			broken = true
			ds = append(ds, l.ds...)
			parts = append(parts, (&hclLoader{file: filename}).decodePipelineBody(body))
			continue
		}
		parts = append(parts, l.decodePipelineBody(body))
		ds = append(ds, l.ds...)
	}
	if !broken {
		return nil, nil, false
	}
	p := head.decodeFile(hbody, parts)
	return p, append(ds, head.ds...), true
}

// cutsPipeline reports whether the block whose body was cut (the last one the
// header opens) is the file's first pipeline block: only then are the pieces
// a pipeline's items.
func cutsPipeline(header *hclsyntax.Body) bool {
	n := len(header.Blocks)
	if n == 0 || header.Blocks[n-1].Type != "pipeline" {
		return false
	}
	for _, b := range header.Blocks[:n-1] {
		if b.Type == "pipeline" {
			return false
		}
	}
	return true
}
