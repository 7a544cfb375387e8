package spec

import (
	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/parser"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/schema"
)

// LoadCUE loads a spec written in CUE: `pipeline: NAME: {...}`, exactly one per
// file. The file is evaluated with cuelang.org/go and unified with the schema
// embedded from schema/pipeline.cue, so unknown fields, wrong types and bad
// enumerations are reported by CUE itself, at the place the author wrote them.
// Durations, timestamps, names and inputs are then checked in Go, with the
// same messages as the HCL loader.
//
// The pipeline is nil only when the file does not parse or defines no
// pipeline; otherwise it holds everything that could be read. Every
// diagnostic points into filename, never into the schema.
//
// Most specs are plain data (fields, literals, lists and structs, no
// references or comprehensions). For those, LoadCUE merges repeated
// declarations of one field (`task: a: {...}` then `task: b: {...}`) into one
// struct before evaluating (the same value in CUE, and much cheaper to
// evaluate than one field with thousands of conjuncts), and reads values and
// exact positions straight from the syntax tree. Any other file is evaluated
// as written and read from its evaluated value.
func LoadCUE(filename string, src []byte) (*Pipeline, diag.Diagnostics) {
	l := &cueLoader{file: filename, src: src}
	p := l.load()
	return p, l.ds
}

// cueLoader holds the state of one LoadCUE call.
type cueLoader struct {
	file string
	src  []byte
	ds   diag.Diagnostics
	// parsed is the file as parsed, used to place positions.
	parsed *ast.File
	// fields indexes the fields of parsed by path; built only when needed.
	fields *cueFieldIndex
	// cueFailed is set when CUE reported an error, so the decoder does not
	// report a second time what CUE already said.
	cueFailed bool
}

func (l *cueLoader) load() *Pipeline {
	f, err := parser.ParseFile(l.file, l.src)
	if err != nil {
		l.addCUEErrors(err, RuleSyntax)
		return nil
	}
	l.parsed = f

	ctx := cuecontext.New()
	sch := ctx.CompileString(schema.PipelineCUE, cue.Filename(schema.PipelineFilename))
	if err := sch.Err(); err != nil {
		// The schema is embedded and tested: this is a bug in pipec, reported
		// as a finding on the file rather than a crash.
		l.ds = append(l.ds, diag.Errorf(RuleSchema, l.fileStart(), "internal error: the embedded schema does not compile: %v", err))
		return nil
	}

	if isPlainFile(f) {
		return l.loadPlain(ctx, sch, f)
	}
	return l.loadEvaluated(ctx, sch, f)
}

// loadPlain evaluates a plain-data file with the schema in scope, then reads
// the pipeline from the (merged) syntax tree.
func (l *cueLoader) loadPlain(ctx *cue.Context, sch cue.Value, f *ast.File) *Pipeline {
	merged := mergeFile(f)
	// Constrain every pipeline with the schema. The constraint is parsed as if
	// it were part of the schema file, so its positions are never the author's.
	constraint, err := parser.ParseFile(schema.PipelineFilename, "pipeline: [string]: #Pipeline")
	if err != nil {
		l.ds = append(l.ds, diag.Errorf(RuleSchema, l.fileStart(), "internal error: %v", err))
		return nil
	}
	merged.Decls = append(merged.Decls, constraint.Decls...)
	v := ctx.BuildFile(merged, cue.Scope(sch))
	if err := v.Validate(cue.Concrete(true)); err != nil {
		l.addCUEErrors(err, "")
	}
	// A plain file has no definitions, hidden fields or embeddings, so its
	// top level holds only the regular fields written there.
	var pipelines []*ast.Field
	for _, d := range merged.Decls[:len(merged.Decls)-len(constraint.Decls)] {
		fd, ok := d.(*ast.Field)
		if !ok {
			continue
		}
		name := plainLabel(fd.Label)
		if name != KindPipeline {
			l.schemaErr(l.nodeRange(fd.Label), "%s: field not allowed: a spec file holds only pipeline: NAME: {...}", name)
			continue
		}
		pipelines = append(pipelines, fd)
	}
	d := &cueDecoder{l: l}
	return d.pipelines(pipelines)
}

// loadEvaluated evaluates a file that is more than plain data (references,
// comprehensions, definitions...), unifies it with the schema, and reads the
// pipeline from the evaluated value, exported back to plain syntax.
func (l *cueLoader) loadEvaluated(ctx *cue.Context, sch cue.Value, f *ast.File) *Pipeline {
	v := sch.LookupPath(cue.MakePath(cue.Def("File"))).Unify(ctx.BuildFile(f))
	if err := v.Validate(cue.Concrete(true)); err != nil {
		l.addCUEErrors(err, "")
	}
	pv := v.LookupPath(cue.MakePath(cue.Str(KindPipeline)))
	if !pv.Exists() {
		return (&cueDecoder{l: l}).pipelines(nil)
	}
	syn := pv.Syntax(cue.Final(), cue.Concrete(true), cue.Docs(false), cue.Definitions(false), cue.Hidden(false), cue.Optional(false), cue.Attributes(false))
	st, ok := syn.(*ast.StructLit)
	if !ok {
		// Already reported by CUE (the pipeline field is not a struct).
		return nil
	}
	d := &cueDecoder{l: l, exported: true}
	var fields []*ast.Field
	for _, e := range st.Elts {
		if fd, ok := e.(*ast.Field); ok {
			fields = append(fields, fd)
		}
	}
	// Wrap the exported pipelines as one field, as they are in a plain file.
	wrapper := &ast.Field{Label: ast.NewIdent(KindPipeline), Value: &ast.StructLit{Elts: fieldsAsDecls(fields)}}
	return d.pipelines([]*ast.Field{wrapper})
}

func fieldsAsDecls(fs []*ast.Field) []ast.Decl {
	ds := make([]ast.Decl, len(fs))
	for i, f := range fs {
		ds[i] = f
	}
	return ds
}

// schemaErr records a schema finding.
func (l *cueLoader) schemaErr(r diag.Range, format string, args ...any) {
	l.ds = append(l.ds, diag.Errorf(RuleSchema, r, format, args...))
}

// fileStart is the range of the first character of the file, for findings
// about the file as a whole.
func (l *cueLoader) fileStart() diag.Range {
	return diag.Range{Filename: l.file, Start: diag.Pos{Line: 1, Column: 1}, End: diag.Pos{Line: 1, Column: 1}}
}
