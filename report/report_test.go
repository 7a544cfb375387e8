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
		{"wide characters take two columns", `name = "注文データ" x`, diag.Range{Start: pos(1, 14), End: pos(1, 15)}, strings.Repeat(" ", 18) + "^"},
		{"range over wide characters", `a = "注文"`, diag.Range{Start: pos(1, 5), End: pos(1, 9)}, "    ^~~~~~"},
		{"emoji is wide", "🚀 = x", diag.Range{Start: pos(1, 5), End: pos(1, 6)}, "     ^"},
		{"combining mark takes none", "e\u0301 = x", diag.Range{Start: pos(1, 6), End: pos(1, 7)}, "    ^"},
		{"escaped control counts as printed", "\x1b[31m = x", diag.Range{Start: pos(1, 9), End: pos(1, 10)}, strings.Repeat(" ", 11) + "^"},
	} {
		if _, got := snippet(tc.line, tc.r); got != tc.want {
			t.Errorf("%s: marker for %q = %q, want %q", tc.name, tc.line, got, tc.want)
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

// TestEscape: control characters, bidi overrides and invalid UTF-8 are made
// visible; newlines, tabs and ordinary Unicode are kept.
func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain → ok 注文":       "plain → ok 注文",
		"a\x1b[2Jb":           `a\x1b[2Jb`,
		"line\roverwrite":     `line\roverwrite`,
		"two\nlines\tand tab": "two\nlines\tand tab",
		"bidi \u202e evil":    `bidi \u202e evil`,
		"bad \xff byte":       `bad \xff byte`,
		"c1 \u009b control":   `c1 \u009b control`,
		"bell\a and del\x7f":  `bell\x07 and del\x7f`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTextEscapesSpecText: an escape sequence in a spec's string reaches
// neither the message nor the snippet raw.
func TestTextEscapesSpecText(t *testing.T) {
	line := "  command = [\"echo\", \"\x1b[2J\x1b]0;pwned\x07\"]"
	src := Sources{"e\x1b.hcl": []byte(line + "\n")}
	ds := diag.Diagnostics{{Rule: "schema", Severity: diag.Error, Message: "bad value \"\x1b[2J\"",
		Range: diag.Range{Filename: "e\x1b.hcl", Start: diag.Pos{Line: 1, Column: 23}, End: diag.Pos{Line: 1, Column: 42}}}}
	var b bytes.Buffer
	if err := Text(&b, ds, src, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsAny(b.Bytes(), "\x1b\x07") {
		t.Errorf("raw control characters in the output:\n%q", b.String())
	}
	want := "e\\x1b.hcl:1:23: error: bad value \"\\x1b[2J\" [schema]\n" +
		`  command = ["echo", "\x1b[2J\x1b]0;pwned\x07"]` + "\n" +
		strings.Repeat(" ", 22) + "^" + strings.Repeat("~", 24) + "\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestSnippetCutsLongLines: a minified line is cut to a window that holds the
// range, marked with … at each cut end, and the marker still points at it.
func TestSnippetCutsLongLines(t *testing.T) {
	line := strings.Repeat("a", 5000) + "TARGET" + strings.Repeat("b", 5000)
	r := diag.Range{Start: diag.Pos{Line: 1, Column: 5001}, End: diag.Pos{Line: 1, Column: 5007}}
	text, marker := snippet(line, r)
	if len(text) > maxSnippetWidth+10 {
		t.Errorf("cut line is %d bytes long", len(text))
	}
	if !strings.HasPrefix(text, "…") || !strings.HasSuffix(text, "…") {
		t.Errorf("cut ends are not marked: %q", text)
	}
	at := strings.Index(marker, "^")
	// "…" is one column wide but three bytes: compare in runes.
	if got := string([]rune(text)[at : at+6]); got != "TARGET" {
		t.Errorf("the marker points at %q, not TARGET\n%s\n%s", got, text, marker)
	}
	if strings.Count(marker, "~") != 5 {
		t.Errorf("marker %q does not underline the range", marker)
	}
	// A range at the start of a long line keeps no leading cut.
	text, marker = snippet(line, diag.Range{Start: diag.Pos{Line: 1, Column: 1}, End: diag.Pos{Line: 1, Column: 3}})
	if strings.HasPrefix(text, "…") || marker != "^~" {
		t.Errorf("start of line: %q %q", text[:10], marker)
	}
}
