package report

import (
	"strings"
	"unicode/utf8"

	"github.com/pipec/pipec/diag"
)

// maxSnippetWidth is the widest source line printed whole; a longer one (a
// minified or generated spec) is cut to a window around the range.
const maxSnippetWidth = 160

// snippetContext is how many columns before the range a cut line keeps.
const snippetContext = 40

// cell is one source character as printed: escaped if it is a control
// character, with its width in terminal columns.
type cell struct {
	text  string
	width int
	tab   bool
}

// snippet returns the source line to print and the ^~~~ marker under the
// range. Characters are escaped (Escape), the marker is placed by display
// width (a wide character takes two columns, an escape as many as it prints),
// tabs are kept so the marker lines up in any terminal, and a line wider than
// maxSnippetWidth is cut around the range with "…" at each cut end.
func snippet(line string, r diag.Range) (text, marker string) {
	var cells []cell
	total := 0
	for i := 0; i < len(line); {
		ru, n := utf8.DecodeRuneInString(line[i:])
		c := cell{text: escapeRune(ru, line[i:i+n]), tab: ru == '\t'}
		switch {
		case c.tab:
			c.width = 8 // only for the cut; the marker keeps the tab itself
		case c.text != line[i:i+n]:
			c.width = len(c.text) // an escape prints as ASCII
		default:
			c.width = runeWidth(ru)
		}
		cells = append(cells, c)
		total += c.width
		i += n
	}
	// Range as cell indexes [start, end): columns count characters from 1.
	start := min(max(r.Start.Column-1, 0), len(cells))
	end := start + 1
	if r.End.Line == r.Start.Line && r.End.Column-1 > start {
		end = r.End.Column - 1
	} else if r.End.Line > r.Start.Line {
		end = len(cells) // the rest of the first line
	}
	end = min(end, len(cells))

	lo, hi := 0, len(cells)
	if total > maxSnippetWidth {
		// Keep some context before the range, then as much as fits.
		lo = start
		for w := 0; lo > 0 && w+cells[lo-1].width <= snippetContext; lo-- {
			w += cells[lo-1].width
		}
		hi = lo
		for w := 0; hi < len(cells) && w+cells[hi].width <= maxSnippetWidth; hi++ {
			w += cells[hi].width
		}
	}

	var tb, mb strings.Builder
	if lo > 0 {
		tb.WriteString("…")
		mb.WriteByte(' ')
	}
	for i := lo; i < hi; i++ {
		tb.WriteString(cells[i].text)
		if i < start {
			if cells[i].tab {
				mb.WriteByte('\t')
			} else {
				mb.WriteString(strings.Repeat(" ", cells[i].width))
			}
		}
	}
	if hi < len(cells) {
		tb.WriteString("…")
	}
	// The marker: ^ then ~ to the range's end, never past the printed part
	// (a hostile end column cannot grow the output).
	mb.WriteByte('^')
	under := 0
	for i := start; i < min(end, hi); i++ {
		if cells[i].tab {
			under += 1
		} else {
			under += cells[i].width
		}
	}
	if under > 1 {
		mb.WriteString(strings.Repeat("~", under-1))
	}
	return tb.String(), mb.String()
}
