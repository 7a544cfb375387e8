package report

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/pipec/pipec/diag"
)

func TestCaret(t *testing.T) {
	pos := func(l, c int) diag.Pos { return diag.Pos{Line: l, Column: c} }
	for _, tc := range []struct {
		name, line string
		r          diag.Range
		want       string
	}{
		{"tabs kept", "\t\tx = 1", diag.Range{Start: pos(1, 3), End: pos(1, 4)}, "\t\t^"},
		{"non-ASCII counts characters", "  é = \"ü\"", diag.Range{Start: pos(1, 7), End: pos(1, 10)}, "      ^~~"},
		{"multi-line underlines to line end", "abc def", diag.Range{Start: pos(1, 5), End: pos(4, 1)}, "    ^~~"},
		{"hostile end column is clipped", "abc", diag.Range{Start: pos(1, 2), End: pos(1, 1<<30)}, " ^~"},
		{"start past the line", "ab", diag.Range{Start: pos(1, 9), End: pos(1, 10)}, "  ^"},
		{"inverted range is a single caret", "abcdef", diag.Range{Start: pos(1, 4), End: pos(1, 2)}, "   ^"},
	} {
		if got := caret(tc.line, tc.r); got != tc.want {
			t.Errorf("%s: caret(%q) = %q, want %q", tc.name, tc.line, got, tc.want)
		}
	}
}

func TestTextLocations(t *testing.T) {
	src := Sources{"p.hcl": []byte("a\r\nbb\n")}
	ds := diag.Diagnostics{
		{Rule: "syntax", Severity: diag.Error, Message: "unreadable"},
		{Rule: "syntax", Severity: diag.Error, Message: "whole file", Range: diag.Range{Filename: "p.hcl"}},
		{Rule: "schema", Severity: diag.Warning, Message: "line only", Range: diag.Range{Filename: "p.hcl", Start: diag.Pos{Line: 2}}},
		{Rule: "schema", Severity: diag.Info, Message: "crlf", Range: diag.Range{Filename: "p.hcl",
			Start: diag.Pos{Line: 1, Column: 1}, End: diag.Pos{Line: 1, Column: 2}}},
		{Rule: "schema", Severity: diag.Error, Message: "past the end", Range: diag.Range{Filename: "p.hcl",
			Start: diag.Pos{Line: 9, Column: 1}, End: diag.Pos{Line: 9, Column: 2}}},
	}
	var b bytes.Buffer
	if err := Text(&b, ds, src, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"error: unreadable [syntax]",
		"p.hcl: error: whole file [syntax]",
		"p.hcl:2: warning: line only [schema]",
		"p.hcl:1:1: info: crlf [schema]",
		"a",
		"^",
		"p.hcl:9:1: error: past the end [schema]",
		"",
	}, "\n")
	if got := b.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// TestLineIndexMatchesSourcesLine keeps Text's line index and Sources.Line in
// agreement on every line number, past the end, and on odd endings.
func TestLineIndexMatchesSourcesLine(t *testing.T) {
	src := Sources{"a": []byte("x\ny\r\n\nz"), "b": []byte("x\n"), "c": []byte(""), "d": []byte("\n\n")}
	idx := lines{src: src}
	for _, f := range []string{"a", "b", "c", "d", "missing"} {
		for n := -1; n <= 6; n++ {
			want, wok := src.Line(f, n)
			got, gok := idx.line(f, n)
			if got != want || gok != wok {
				t.Errorf("%s line %d: index gives %q %v, Sources.Line %q %v", f, n, got, gok, want, wok)
			}
		}
	}
}

// BenchmarkTextManyFindings prints one finding per line of a large spec: the
// line lookup must not rescan the file for each finding.
func BenchmarkTextManyFindings(b *testing.B) {
	var src strings.Builder
	var ds diag.Diagnostics
	for i := 1; i <= 20000; i++ {
		src.WriteString(`  task "t" { command = ["true"] }` + "\n")
		ds = append(ds, diag.Diagnostic{Rule: "r", Message: "m", Range: diag.Range{Filename: "p.hcl",
			Start: diag.Pos{Line: i, Column: 3}, End: diag.Pos{Line: i, Column: 7}}})
	}
	sources := Sources{"p.hcl": []byte(src.String())}
	b.ReportAllocs()
	for b.Loop() {
		if err := Text(io.Discard, ds, sources, TextOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
