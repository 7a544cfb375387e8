// Package specload loads a spec file in either syntax: HCL with spec.LoadHCL,
// CUE with cuespec.LoadCUE. It is apart from package spec so that a program
// that reads only HCL (cmd/pipec-lint) does not link CUE, whose packages'
// initialisation alone costs a short lint run more than the lint itself.
package specload

import (
	"fmt"
	"os"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/specdetect"
	"github.com/pipec/pipec/spec"
	"github.com/pipec/pipec/spec/cuespec"
)

// LoadFile reads and loads one spec file; a file it cannot read, or whose
// extension is not a spec's, is a *spec.ReadError. filename is used in ranges as given,
// so callers pass a path relative to the working directory.
func LoadFile(filename string) (*spec.Pipeline, []byte, diag.Diagnostics, error) {
	syn, ok := spec.SyntaxOf(filename)
	if !ok {
		return nil, nil, nil, &spec.ReadError{Err: fmt.Errorf("%s: not a spec file (want .hcl or .cue)", filename)}
	}
	src, err := os.ReadFile(filename)
	if err != nil {
		return nil, nil, nil, &spec.ReadError{Err: err}
	}
	p, ds := Load(syn, filename, src)
	return p, src, ds, nil
}

// Load parses src in the given syntax. The pipeline is nil only when nothing
// usable could be read; otherwise it is as complete as the diagnostics allow.
func Load(syn spec.Syntax, filename string, src []byte) (*spec.Pipeline, diag.Diagnostics) {
	return LoadCached(syn, filename, src, nil)
}

// LoadCached is Load with a CUE file's valid chunks remembered in cache
// (cuespec.ChunkCache; nil: none), for a caller that loads one document
// again and again (the language server).
func LoadCached(syn spec.Syntax, filename string, src []byte, cache *cuespec.ChunkCache) (*spec.Pipeline, diag.Diagnostics) {
	if syn == spec.SyntaxCUE {
		p, ds := cuespec.LoadCUECached(filename, src, cache)
		if p != nil {
			p.File = filename
		}
		return p, ds.Sort()
	}
	return spec.Load(syn, filename, src)
}

// IsPipeline decides, by parsing, whether a .hcl or .cue file holds a
// pipeline (see specdetect.IsPipeline and cuespec.IsPipeline).
func IsPipeline(syn spec.Syntax, src []byte) bool {
	if syn == spec.SyntaxCUE {
		return cuespec.IsPipeline(src)
	}
	return specdetect.IsPipeline(syn, src)
}

// Both reads HCL and CUE: Load and IsPipeline as methods, for callers that
// take the languages a program links as a value (lint/lintcmd).
type Both struct{}

// Reads reports true for both syntaxes.
func (Both) Reads(syn spec.Syntax) bool { return syn == spec.SyntaxHCL || syn == spec.SyntaxCUE }

// Load is specload.Load.
func (Both) Load(syn spec.Syntax, filename string, src []byte) (*spec.Pipeline, diag.Diagnostics) {
	return Load(syn, filename, src)
}

// IsPipeline is specload.IsPipeline.
func (Both) IsPipeline(syn spec.Syntax, src []byte) bool { return IsPipeline(syn, src) }
