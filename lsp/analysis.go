package lsp

import (
	"sync"

	"go.lsp.dev/protocol"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/config"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/spec"
	"github.com/pipec/pipec/spec/cuespec"
	"github.com/pipec/pipec/spec/specload"
)

// analysis is what the server knows about one version of a document. It is
// immutable once built, so request handlers read it without locks.
type analysis struct {
	gen      uint64 // the document generation it was built from
	version  int32
	uri      protocol.DocumentURI
	path     string
	syn      spec.Syntax
	src      []byte
	lines    *lines
	pipeline bool // false for HCL or CUE that is not a pipeline spec
	spec     *spec.Pipeline
	result   *compiler.Result // nil when the spec does not parse
	diags    diag.Diagnostics

	// symbols is built on the first request that needs names, not on the
	// way to publishing diagnostics, which is what typing waits for.
	symbolsOnce sync.Once
	symbols     *symbols
}

// syms returns the name occurrences of the document.
func (a *analysis) syms() *symbols {
	a.symbolsOnce.Do(func() { a.symbols = buildSymbols(a.spec, a.lines) })
	return a.symbols
}

// analyze loads, compiles and lints a document's text exactly as `pipec lint`
// does a file: loader and compiler findings, then the rules with the lint
// options and its pipec:ignore comments, then the severities of the
// configuration. A spec that does not parse is not compiled, so a syntax
// error brings no follow-on findings. A file that is not a pipeline spec, or
// that the configuration ignores, gets nothing.
func analyze(path string, syn spec.Syntax, src []byte, opts lint.Options, cfg *config.Config, chunks *cuespec.ChunkCache) *analysis {
	a := &analysis{path: path, syn: syn, src: src, lines: newLines(src)}
	if !specload.IsPipeline(syn, src) || cfg.Ignored(path) {
		return a
	}
	a.pipeline = true
	p, ds := specload.LoadCached(syn, path, src, chunks)
	a.spec = p
	a.diags = ds
	if p != nil && !hasRule(ds, spec.RuleSyntax) {
		res, cds := compiler.Check(p)
		a.result = res
		a.diags = append(a.diags, cds...)
		a.diags = append(a.diags, lint.Run(res, src, opts)...)
	}
	a.diags = cfg.Apply(a.diags).Sort()
	return a
}

func hasRule(ds diag.Diagnostics, rule string) bool {
	for _, d := range ds {
		if d.Rule == rule {
			return true
		}
	}
	return false
}
