// Package report prints diagnostics for people and machines: text with the
// source line and a caret, JSON, SARIF and GitHub workflow annotations. Every
// printer writes findings in the order given; callers sort them first
// (diag.Diagnostics.Sort), so identical input gives identical bytes.
package report

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/pipec/pipec/diag"
)

// Sources maps a file name, as it appears in diagnostics, to its content, so
// printers can show the offending line.
type Sources map[string][]byte

// Line returns the text of the 1-based line n of file, without its newline.
func (s Sources) Line(file string, n int) (string, bool) {
	src, ok := s[file]
	if !ok || n < 1 {
		return "", false
	}
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(src, '\n')
		if j < 0 {
			return "", false
		}
		src = src[j+1:]
	}
	if j := bytes.IndexByte(src, '\n'); j >= 0 {
		src = src[:j]
	}
	return strings.TrimSuffix(string(src), "\r"), true
}

// lines finds source lines by number in O(1) after one pass over each file,
// so printing many findings on a large spec is not quadratic.
type lines struct {
	src    Sources
	starts map[string][]int // byte offset of each line's start, per file
}

func (l *lines) line(file string, n int) (string, bool) {
	src, ok := l.src[file]
	if !ok || n < 1 {
		return "", false
	}
	starts, ok := l.starts[file]
	if !ok {
		starts = lineStarts(src)
		if l.starts == nil {
			l.starts = map[string][]int{}
		}
		l.starts[file] = starts
	}
	if n > len(starts) {
		return "", false
	}
	text := src[starts[n-1]:]
	if j := bytes.IndexByte(text, '\n'); j >= 0 {
		text = text[:j]
	}
	return strings.TrimSuffix(string(text), "\r"), true
}

// lineStarts returns the byte offset of each line's start. It counts and
// finds the newlines with the bytes package's vectorised searches: a loop
// over every byte was most of printing one finding on a 1 MB spec.
func lineStarts(src []byte) []int {
	starts := make([]int, 1, 1+bytes.Count(src, []byte{'\n'}))
	for i := 0; ; {
		j := bytes.IndexByte(src[i:], '\n')
		if j < 0 {
			return starts
		}
		i += j + 1
		starts = append(starts, i)
	}
}

// TextOptions controls the text format.
type TextOptions struct {
	// Color adds ANSI colours; callers enable it only on a terminal without NO_COLOR.
	Color bool
}

const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
	ansiGreen  = "\x1b[32m"
)

// Text writes `file:line:col: severity: message [rule]`, then the source line
// and a caret under the range (^~~~), as compilers and actionlint do. Text
// from the spec (file names, messages quoting values, the source line) is
// escaped, so a spec cannot send escape sequences to the terminal.
func Text(w io.Writer, ds diag.Diagnostics, src Sources, opt TextOptions) error {
	paint := func(code, s string) string {
		if !opt.Color {
			return s
		}
		return code + s + ansiReset
	}
	var b strings.Builder
	idx := lines{src: src}
	for _, d := range ds {
		sevColor := ansiRed
		switch d.Severity {
		case diag.Warning:
			sevColor = ansiYellow
		case diag.Info:
			sevColor = ansiCyan
		}
		if loc := location(d.Range); loc != "" {
			b.WriteString(paint(ansiBold, Escape(loc)) + ": ")
		}
		fmt.Fprintf(&b, "%s: %s %s\n", paint(sevColor, d.Severity.String()), Escape(d.Message), paint(ansiBold, "["+Escape(d.Rule)+"]"))
		if line, ok := idx.line(d.Range.Filename, d.Range.Start.Line); ok && d.Range.Start.Column >= 1 {
			text, marker := snippet(line, d.Range)
			b.WriteString(text)
			b.WriteByte('\n')
			b.WriteString(paint(ansiGreen, marker))
			b.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// location is file:line:col, shortened when the finding has no column, no
// line or no file (an unreadable input), so the text never shows ":0:0".
func location(r diag.Range) string {
	switch {
	case r.Filename == "" && r.Start.Line < 1:
		return ""
	case r.Start.Line < 1:
		return r.Filename
	case r.Start.Column < 1:
		return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line)
	}
	return r.String()
}
