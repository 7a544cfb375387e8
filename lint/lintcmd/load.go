package lintcmd

import (
	"bytes"
	"os"
	"unicode/utf8"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/specdetect"
	"github.com/pipec/pipec/spec"
)

// CompileFunc is compiler.Compile or compiler.Check.
type CompileFunc func(*spec.Pipeline) (*compiler.Result, diag.Diagnostics)

// Loaded is one spec's text, loaded and compiled.
type Loaded struct {
	// Src is the text, nil for a binary file (never printed as a source line).
	Src []byte
	// Result is nil when the spec could not be loaded at all, or does not
	// parse.
	Result *compiler.Result
	// Diags are the loader's and the compiler's findings, sorted.
	Diags diag.Diagnostics
}

// LoadSource loads and compiles a spec's text. A binary file (a NUL byte, or
// not UTF-8) gets one finding instead of one per byte the parser trips on. A
// file that does not parse is not compiled: the model of a broken file is
// partial, and compiling it would report follow-on errors (a missing artifact
// whose producer is in the broken part) for a cause already reported.
func LoadSource(syns Syntaxes, syn spec.Syntax, name string, src []byte, compile CompileFunc) Loaded {
	l := Loaded{Src: src}
	if specdetect.IsBinary(src) {
		l.Diags = diag.Diagnostics{diag.Errorf(spec.RuleSyntax, binaryRange(name, src),
			"the file is binary (%s), not a %s spec", binaryReason(src), syn)}
		l.Src = nil
		return l
	}
	p, ds := syns.Load(syn, name, src)
	l.Diags = ds
	if p == nil || hasRule(ds, spec.RuleSyntax) {
		return l
	}
	res, cds := compile(p)
	l.Result = res
	l.Diags = append(l.Diags, cds...).Sort()
	return l
}

// loadFile reads and loads one spec file for lint; a folder, a file that is
// not a spec or cannot be read is a usage error.
func loadFile(syns Syntaxes, path string) (Loaded, error) {
	if st, err := os.Stat(path); err != nil {
		return Loaded{}, usageErr("%v", unwrapPathError(err))
	} else if st.IsDir() {
		return Loaded{}, usageErr("%s is a folder; give a spec file (.hcl or .cue)", path)
	}
	syn, ok := spec.SyntaxOf(path)
	if !ok {
		return Loaded{}, usageErr("%s: not a spec file (want .hcl or .cue)", path)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return Loaded{}, usageErr("%v", unwrapPathError(err))
	}
	return LoadSource(syns, syn, path, src, compiler.Check), nil
}

// binaryReason says what makes src binary.
func binaryReason(src []byte) string {
	if i := bytes.IndexByte(src[:min(len(src), 8000)], 0); i >= 0 {
		return "it holds a NUL byte"
	}
	return "it is not UTF-8 text"
}

// binaryRange points at the first offending byte's line.
func binaryRange(name string, src []byte) diag.Range {
	i := bytes.IndexByte(src[:min(len(src), 8000)], 0)
	if i < 0 {
		for j := 0; j < len(src); {
			r, n := utf8.DecodeRune(src[j:])
			if r == utf8.RuneError && n <= 1 {
				i = j
				break
			}
			j += n
		}
	}
	line := 1 + bytes.Count(src[:max(i, 0)], []byte("\n"))
	return diag.Range{Filename: name, Start: diag.Pos{Line: line, Column: 1}, End: diag.Pos{Line: line, Column: 2}}
}

// hasRule reports whether any finding is of the given rule.
func hasRule(ds diag.Diagnostics, rule string) bool {
	for _, d := range ds {
		if d.Rule == rule {
			return true
		}
	}
	return false
}
