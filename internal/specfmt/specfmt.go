// Package specfmt is the canonical layout of spec files, shared by `pipec fmt`
// and the language server's formatting so an editor and the command line can
// never disagree about what formatted means.
package specfmt

import (
	"cuelang.org/go/cue/format"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
	"github.com/pipec/pipec/spec/specload"
)

// Source returns the canonical layout of a spec (HCL with hclwrite, CUE with
// cue/format). A file that does not parse is reported, never rewritten.
func Source(file string, src []byte) ([]byte, diag.Diagnostics) {
	syn, _ := spec.SyntaxOf(file)
	var out []byte
	var failed bool
	if syn == spec.SyntaxCUE {
		var err error
		out, err = format.Source(src)
		failed = err != nil
	} else {
		_, hds := hclsyntax.ParseConfig(src, file, hcl.InitialPos)
		failed = hds.HasErrors()
		out = hclwrite.Format(src)
	}
	if !failed {
		return out, nil
	}
	_, ds := specload.Load(syn, file, src)
	var syntax diag.Diagnostics
	for _, d := range ds {
		if d.Rule == spec.RuleSyntax {
			syntax = append(syntax, d)
		}
	}
	if len(syntax) == 0 {
		syntax = diag.Diagnostics{diag.Errorf(spec.RuleSyntax, diag.Range{Filename: file, Start: diag.Pos{Line: 1, Column: 1}, End: diag.Pos{Line: 1, Column: 2}},
			"the file does not parse, so it cannot be formatted")}
	}
	return nil, syntax
}
