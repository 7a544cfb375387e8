// Package cuespec loads a pipeline spec written in CUE into package spec's
// model (LoadCUE), the counterpart of spec.LoadHCL: the same model, the
// same checks and messages, findings at the file, line and column the
// author wrote.
//
// It is apart from package spec so that only a program that reads CUE
// links cuelang.org/go, whose packages' initialisation alone costs a short
// HCL lint more than the lint itself (cmd/pipec-lint reads HCL only).
// LoadCUECached and ChunkCache serve the language server, which loads the
// same file again at every edit and evaluates only the chunks the edit
// touched (docs/editors.md); IsPipeline tells a CUE pipeline from other
// CUE files.
package cuespec
