package report

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/width"
)

// Escape makes text from a spec safe to print on a terminal: control
// characters (an ESC starting a colour or cursor sequence, a carriage return
// that overwrites the line, C1 controls), Unicode bidirectional overrides
// ("Trojan Source") and invalid UTF-8 are written as Go-style escapes
// (\x1b, \r, \u202e, \xff). Newlines (also CRLF) and tabs are kept: messages may span
// lines, and tabs keep a caret aligned.
func Escape(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == '\r' && strings.HasPrefix(s[i+1:], "\n") {
			b.WriteByte('\r') // a CRLF line end is harmless
		} else {
			b.WriteString(escapeRune(r, s[i:i+n]))
		}
		i += n
	}
	return b.String()
}

// needsEscape is Escape's fast path: most text needs nothing.
func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f || c >= 0x80 {
			if c >= 0x80 {
				return slowNeedsEscape(s[i:])
			}
			return true
		}
	}
	return false
}

func slowNeedsEscape(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if escapeRune(r, s[i:i+n]) != s[i:i+n] {
			return true
		}
		i += n
	}
	return false
}

// escapeRune is the printable form of one decoded rune (raw is its bytes).
func escapeRune(r rune, raw string) string {
	switch {
	case r == utf8.RuneError && len(raw) == 1:
		return fmt.Sprintf(`\x%02x`, raw[0])
	case r == '\n' || r == '\t':
		return raw
	case r == '\r':
		return `\r`
	case r < 0x20 || r == 0x7f:
		return fmt.Sprintf(`\x%02x`, r)
	case r >= 0x80 && r <= 0x9f, isBidiControl(r):
		return fmt.Sprintf(`\u%04x`, r)
	}
	return raw
}

// isBidiControl reports the explicit directional formatting characters that
// can make source read differently from how it parses.
func isBidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}

// runeWidth is how many terminal columns a printable rune takes: 2 for East
// Asian wide and full-width characters, 0 for combining marks, else 1.
func runeWidth(r rune) int {
	if unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || r == 0x200b || r == 0x200d {
		return 0
	}
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}
