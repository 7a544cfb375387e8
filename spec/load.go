package spec

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/pipec/pipec/diag"
)

// Rule ids the loaders report under (docs/design.md section 5).
const (
	RuleSyntax = "syntax"
	RuleSchema = "schema"
)

// Syntax names the spec languages.
type Syntax string

const (
	SyntaxHCL Syntax = "hcl"
	SyntaxCUE Syntax = "cue"
)

// SyntaxOf picks the language from the file extension.
func SyntaxOf(path string) (Syntax, bool) {
	switch filepath.Ext(path) {
	case ".hcl":
		return SyntaxHCL, true
	case ".cue":
		return SyntaxCUE, true
	}
	return "", false
}

// Load parses src as HCL (spec.SyntaxHCL). CUE lives in package cuespec, so
// that programs reading only HCL do not link it: specload.Load takes both.
// The pipeline is nil only when nothing usable could be read; otherwise it is
// as complete as the diagnostics allow.
func Load(syn Syntax, filename string, src []byte) (*Pipeline, diag.Diagnostics) {
	if syn != SyntaxHCL {
		return nil, diag.Diagnostics{diag.Errorf(RuleSyntax, diag.Range{Filename: filename, Start: diag.Pos{Line: 1, Column: 1}, End: diag.Pos{Line: 1, Column: 1}},
			"%s specs are read by package specload, not spec", syn)}
	}
	p, ds := LoadHCL(filename, src)
	if p != nil {
		p.File = filename
	}
	return p, ds.Sort()
}

// ReadError is returned by LoadFile when the file cannot be read or has an
// unknown extension: a usage problem (exit code 2), not a finding.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// LoadFile reads and loads one HCL spec file (specload.LoadFile reads CUE
// too). filename is used in ranges as given, so callers pass a path relative
// to the working directory.
func LoadFile(filename string) (*Pipeline, []byte, diag.Diagnostics, error) {
	syn, ok := SyntaxOf(filename)
	if !ok {
		return nil, nil, nil, &ReadError{fmt.Errorf("%s: not a spec file (want .hcl or .cue)", filename)}
	}
	if syn != SyntaxHCL {
		return nil, nil, nil, &ReadError{fmt.Errorf("%s: package spec reads HCL only; load CUE with package specload", filename)}
	}
	src, err := os.ReadFile(filename)
	if err != nil {
		return nil, nil, nil, &ReadError{err}
	}
	p, ds := Load(syn, filename, src)
	return p, src, ds, nil
}
