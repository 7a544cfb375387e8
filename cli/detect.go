package cli

import (
	"github.com/pipec/pipec/internal/specdetect"
	"github.com/pipec/pipec/spec"
	"github.com/pipec/pipec/spec/specload"
)

// isPipelineSpec decides whether a .hcl or .cue file holds a pipeline (see
// specload.IsPipeline, shared with the language server).
func isPipelineSpec(syn spec.Syntax, src []byte) bool { return specload.IsPipeline(syn, src) }

// isBinary reports whether src cannot be a text spec.
func isBinary(src []byte) bool { return specdetect.IsBinary(src) }
