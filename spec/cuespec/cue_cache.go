package cuespec

import (
	"cmp"
	"crypto/sha256"
	"hash"
	"maps"
	"slices"
	"strconv"
	"sync"

	"cuelang.org/go/cue/ast"
)

// ChunkCache remembers the chunks of plain files that CUE found valid, by
// their content, so a file loaded again (the language server re-analyses
// the whole document on every edit) is evaluated only in the chunks that
// changed. Only valid chunks are kept: the validity of plain data against
// the schema depends on its content alone, not on where it sits in the
// file, whereas a chunk's errors carry positions, so a chunk in error is
// always evaluated again and its findings stay exactly what CUE reports.
// The language server keeps one (LoadCUECached); a one-shot command has
// nothing to reuse and uses none.
//
// The key is a position-free writing of the chunk's data (labels, literals,
// lists, structs and attributes; comments left out), hashed. Two chunks with
// the same key are the same CUE value, so they get the same answer.
//
// It also keeps the parsed pieces of big plain files (parseCUE) by their
// text, so that a load parses again only the pieces an edit changed. A
// load takes the pieces it uses out of the cache (moving a piece into a
// file writes its positions, so no two loads may hold one) and gives them
// back when done (keepPieces).
type ChunkCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]uint64 // key -> the load that last used it
	// load counts the loads that consulted the cache.
	load uint64
	// pieces maps a piece's text to its parse; pieceBytes is the text they
	// hold, and kept counts the calls of keepPieces (cuePiece.kept).
	pieces     map[string]*cuePiece
	pieceBytes int
	kept       uint64
}

// NewChunkCache is an empty cache.
func NewChunkCache() *ChunkCache {
	return &ChunkCache{m: map[[sha256.Size]byte]uint64{}, pieces: map[string]*cuePiece{}}
}

// maxPieceBytes bounds the text of the pieces kept: a parsed tree takes
// some 25 times its text in memory, so 2 MB of text (a 20,000-task spec)
// is about 50 MB. The pieces of a bigger file are not kept at all.
const maxPieceBytes = 2 << 20

// takePiece takes the parse of a piece with this text out of the cache, or
// returns nil.
func (c *ChunkCache) takePiece(text []byte) *cuePiece {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pieces[string(text)]
	if p != nil {
		delete(c.pieces, p.text)
		c.pieceBytes -= len(p.text)
	}
	return p
}

// keepPieces gives the pieces of one load to the cache, dropping those kept
// longest ago beyond maxPieceBytes.
func (c *ChunkCache) keepPieces(ps []*cuePiece) {
	total := 0
	for _, p := range ps {
		total += len(p.text)
	}
	if c == nil || len(ps) == 0 || total > maxPieceBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kept++
	for _, p := range ps {
		if old := c.pieces[p.text]; old != nil {
			c.pieceBytes -= len(old.text)
		}
		p.kept = c.kept
		c.pieces[p.text] = p
		c.pieceBytes += len(p.text)
	}
	if c.pieceBytes <= maxPieceBytes {
		return
	}
	old := slices.SortedFunc(maps.Values(c.pieces), func(a, b *cuePiece) int { return cmp.Compare(a.kept, b.kept) })
	for _, p := range old {
		if c.pieceBytes <= maxPieceBytes {
			break
		}
		delete(c.pieces, p.text)
		c.pieceBytes -= len(p.text)
	}
}

// maxValidChunks bounds the cache: 100 chunks is a 100,000-task spec, so a
// few such documents fit. Past the bound, what the current load did not use
// is dropped.
const maxValidChunks = 512

// chunkKey returns the cache key of a plain chunk.
func chunkKey(f *ast.File) [sha256.Size]byte {
	w := keyWriter{buf: make([]byte, 0, 4096), h: sha256.New()}
	w.decls(f.Decls)
	w.flush()
	var k [sha256.Size]byte
	w.h.Sum(k[:0])
	return k
}

// keyWriter writes the data of plain syntax into a hash, through a buffer.
type keyWriter struct {
	buf []byte
	h   hash.Hash
}

func (w *keyWriter) flush() {
	w.h.Write(w.buf)
	w.buf = w.buf[:0]
}

func (w *keyWriter) str(s string) {
	w.buf = strconv.AppendQuote(w.buf, s)
	if len(w.buf) > 1<<15 {
		w.flush()
	}
}

func (w *keyWriter) b(c byte) { w.buf = append(w.buf, c) }

func (w *keyWriter) decls(ds []ast.Decl) {
	for _, d := range ds {
		switch x := d.(type) {
		case *ast.Field:
			w.b('F')
			w.str(plainLabel(x.Label))
			w.expr(x.Value)
			for _, a := range x.Attrs {
				w.b('@')
				w.str(a.Text)
			}
		case *ast.Attribute:
			w.b('@')
			w.str(x.Text)
		case *ast.Package:
			w.b('P')
			if x.Name != nil {
				w.str(x.Name.Name)
			}
		case *ast.CommentGroup:
		default:
			// Not plain: never the case for the chunks of a plain file;
			// written so that two such chunks never share a key.
			w.b('?')
			w.str(strconv.Itoa(int(d.Pos().Offset())))
		}
	}
}

func (w *keyWriter) expr(e ast.Expr) {
	switch x := e.(type) {
	case *ast.BasicLit:
		w.b('L')
		w.str(x.Kind.String())
		w.str(x.Value)
	case *ast.UnaryExpr:
		w.b('U')
		w.str(x.Op.String())
		w.expr(x.X)
	case *ast.ListLit:
		w.b('[')
		for _, el := range x.Elts {
			w.expr(el)
		}
		w.b(']')
	case *ast.StructLit:
		w.b('{')
		w.decls(x.Elts)
		w.b('}')
	default:
		w.b('?')
		if e != nil {
			w.str(strconv.Itoa(int(e.Pos().Offset())))
		}
	}
}

// knownValid reports whether a chunk with this key was found valid, and marks
// the key as used by this load.
func (c *ChunkCache) knownValid(k [sha256.Size]byte, load uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		c.m[k] = load
		return true
	}
	return false
}

// rememberValid records a chunk CUE found valid.
func (c *ChunkCache) rememberValid(k [sha256.Size]byte, load uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[k] = load
	if len(c.m) <= maxValidChunks {
		return
	}
	// Keep only what the current load used.
	for key, l := range c.m {
		if l != load {
			delete(c.m, key)
		}
	}
}

// startLoad numbers a load that uses the cache.
func (c *ChunkCache) startLoad() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.load++
	return c.load
}
