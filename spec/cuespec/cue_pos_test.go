package cuespec

import (
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/gendag"
)

// TestLineIndexAgreesWithCUE: lineIndex places every node of a parsed spec
// where CUE's own positions do, columns counted in characters, whatever
// the order positions are asked in.
func TestLineIndexAgreesWithCUE(t *testing.T) {
	srcs := map[string][]byte{
		"unicode": []byte("// é\npipeline: \"ünï\": {\n\ttask: \"a€b\": {command: [\"é\", \"x\"], timeout: \"1m\"}\n\ttask: b: {command: [\"\\u00e9\"]}}\n"),
		"bom":     []byte("\xef\xbb\xbfpipeline: p: {task: a: {command: [\"x\"]}}\n"),
		"crlf":    []byte("pipeline: p: {\r\n\ttask: a: {command: [\"é\"]}\r\n}"),
		"no end":  []byte("pipeline: p: task: a: command: [\"x\"]"),
	}
	d, err := gendag.Generate(300, 42)
	if err != nil {
		t.Fatal(err)
	}
	srcs["gendag"] = d.CUE()
	addTestdataSpecs(t, srcs)
	for name, src := range srcs {
		f, err := parser.ParseFile("p.cue", src)
		if err != nil {
			continue
		}
		var ps []token.Pos
		ast.Walk(f, func(n ast.Node) bool {
			ps = append(ps, n.Pos(), n.End())
			return true
		}, nil)
		l := &cueLoader{file: "p.cue", src: src}
		check := func(p token.Pos) {
			got, ok := l.pos(p)
			want, wantOK := cuePos(src, p)
			if got != want || ok != wantOK {
				t.Fatalf("%s: %v placed at %+v %v, CUE says %+v %v", name, p, got, ok, want, wantOK)
			}
		}
		for _, p := range ps {
			check(p)
		}
		for i := len(ps) - 1; i >= 0; i -= 7 { // backwards, skipping
			check(ps[i])
		}
	}
}

// cuePos is what cueLoader.pos computed from token.Pos.Position alone.
func cuePos(src []byte, p token.Pos) (diag.Pos, bool) {
	if !p.IsValid() || p.File() == nil {
		return diag.Pos{}, false
	}
	pp := p.Position()
	if pp.Filename != "p.cue" || pp.Line < 1 {
		return diag.Pos{}, false
	}
	off, line, col := pp.Offset, pp.Line, pp.Column
	start := off - (col - 1)
	if col < 1 || start < 0 || off > len(src) {
		return diag.Pos{Line: line, Column: max(col, 1), Byte: off}, true
	}
	return diag.Pos{Line: line, Column: utf8.RuneCount(src[start:off]) + 1, Byte: off}, true
}

// addTestdataSpecs adds the specs under testdata/cue to srcs, by path.
func addTestdataSpecs(t testing.TB, srcs map[string][]byte) {
	files, err := filepath.Glob(filepath.Join("testdata", "cue", "*", "*.cue"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no specs under testdata/cue: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs[f] = b
	}
}
