package lintcmd

import (
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/specdetect"
	"github.com/pipec/pipec/spec"
)

// Syntaxes are the spec languages a program links loaders for:
// specload.Both in pipec, HCLOnly in pipec-lint (CUE's packages alone cost a
// short lint run more than the lint, in initialisation).
type Syntaxes interface {
	// Reads reports whether Load and IsPipeline take syn.
	Reads(syn spec.Syntax) bool
	// Load parses a spec (see specload.Load).
	Load(syn spec.Syntax, filename string, src []byte) (*spec.Pipeline, diag.Diagnostics)
	// IsPipeline decides whether a file holds a pipeline (see
	// specload.IsPipeline).
	IsPipeline(syn spec.Syntax, src []byte) bool
}

// HCLOnly reads HCL specs only; a run that meets a CUE file ends with an
// *UnreadSyntaxError before printing anything.
type HCLOnly struct{}

func (HCLOnly) Reads(syn spec.Syntax) bool { return syn == spec.SyntaxHCL }

func (HCLOnly) Load(syn spec.Syntax, filename string, src []byte) (*spec.Pipeline, diag.Diagnostics) {
	return spec.Load(syn, filename, src)
}

func (HCLOnly) IsPipeline(syn spec.Syntax, src []byte) bool { return specdetect.IsPipeline(syn, src) }
