package cli

import "testing"

// TestDOTQuote: a name cannot end a DOT string early, add a line, or send an
// escape sequence to the terminal that shows the DOT source.
func TestDOTQuote(t *testing.T) {
	for in, want := range map[string]string{
		"plain":        `"plain"`,
		`a"b\c`:        `"a\"b\\c"`,
		"two\nlines":   `"two\nlines"`,
		"esc\x1b[31m!": `"esc\\x1b[31m!"`,
	} {
		if got := dotQuote(in); got != want {
			t.Errorf("dotQuote(%q) = %s, want %s", in, got, want)
		}
	}
	if got := mermaidText("say \"hi\"\nnow"); got != "say #quot;hi#quot;<br/>now" {
		t.Errorf("mermaidText = %q", got)
	}
}
