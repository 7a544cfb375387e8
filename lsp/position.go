package lsp

import (
	"sort"
	"unicode/utf16"
	"unicode/utf8"

	"go.lsp.dev/protocol"

	"github.com/pipec/pipec/diag"
)

// lines maps between byte offsets of a text and LSP positions. LSP counts
// characters in UTF-16 code units (the default position encoding, the one
// every client supports), pipec in bytes and runes, so every position that
// crosses the wire goes through here.
type lines struct {
	src   []byte
	start []int // byte offset of each line's first byte
}

func newLines(src []byte) *lines {
	start := make([]int, 1, len(src)/32+1)
	for i, b := range src {
		if b == '\n' {
			start = append(start, i+1)
		}
	}
	return &lines{src: src, start: start}
}

// lineEnd is the offset of the end of line n (before its newline).
func (l *lines) lineEnd(n int) int {
	if n+1 < len(l.start) {
		end := l.start[n+1] - 1
		if end > l.start[n] && l.src[end-1] == '\r' {
			end--
		}
		return end
	}
	return len(l.src)
}

// position converts a byte offset to an LSP position.
func (l *lines) position(off int) protocol.Position {
	off = min(max(off, 0), len(l.src))
	n := sort.Search(len(l.start), func(i int) bool { return l.start[i] > off }) - 1
	return protocol.Position{Line: uint32(n), Character: uint32(utf16Len(l.src[l.start[n]:off]))}
}

// offset converts an LSP position to a byte offset, clamping a position past
// the end of its line (or of the text) to that end, as the protocol asks.
func (l *lines) offset(p protocol.Position) int {
	n := int(p.Line)
	if n >= len(l.start) {
		return len(l.src)
	}
	off, end := l.start[n], l.lineEnd(n)
	for units := int(p.Character); units > 0 && off < end; {
		r, size := utf8.DecodeRune(l.src[off:end])
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if w > units {
			break
		}
		units -= w
		off += size
	}
	return off
}

// pipecOffset is the byte offset of a pipec position. Loaders fill Byte, but a
// position built from a line and a column alone (Byte 0 past line 1) is
// converted through its column, which counts characters.
func (l *lines) pipecOffset(p diag.Pos) int {
	if p.Line <= 0 {
		return 0
	}
	n := p.Line - 1
	if n >= len(l.start) {
		return len(l.src)
	}
	if p.Byte >= l.start[n] && p.Byte <= l.lineEnd(n) && (p.Byte > 0 || n == 0) {
		return p.Byte
	}
	off, end := l.start[n], l.lineEnd(n)
	for c := 1; c < p.Column && off < end; c++ {
		_, size := utf8.DecodeRune(l.src[off:end])
		off += size
	}
	return off
}

// rangeOf converts a pipec range to an LSP range. A range with no end, or an
// end before its start, becomes the start alone.
func (l *lines) rangeOf(r diag.Range) protocol.Range {
	s := l.pipecOffset(r.Start)
	e := s
	if r.End.Line > 0 {
		e = max(s, l.pipecOffset(r.End))
	}
	return protocol.Range{Start: l.position(s), End: l.position(e)}
}

// span converts byte offsets to an LSP range.
func (l *lines) span(s, e int) protocol.Range {
	return protocol.Range{Start: l.position(s), End: l.position(e)}
}

// utf16Len counts the UTF-16 code units of b.
func utf16Len(b []byte) int {
	n := 0
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		n += utf16.RuneLen(r)
		b = b[size:]
	}
	return n
}
