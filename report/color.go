package report

import (
	"io"
	"os"

	"github.com/mattn/go-isatty"
)

// UseColor reports whether text output to w should be coloured: only when w is
// a terminal, NO_COLOR is unset or empty (https://no-color.org) and TERM is
// not "dumb". getenv is passed in (os.Getenv in main) so tests and callers
// with their own environment do not depend on the process's.
func UseColor(w io.Writer, getenv func(string) string) bool {
	if getenv("NO_COLOR") != "" || getenv("TERM") == "dumb" {
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}
