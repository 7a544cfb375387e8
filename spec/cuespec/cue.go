package cuespec

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/schema"
	"github.com/pipec/pipec/spec"
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
func LoadCUE(filename string, src []byte) (p *spec.Pipeline, ds diag.Diagnostics) {
	return LoadCUECached(filename, src, nil)
}

// LoadCUECached is LoadCUE with the chunks of a plain file that CUE found
// valid in earlier loads taken from cache, and those it finds valid now
// added (nil: no cache).
func LoadCUECached(filename string, src []byte, cache *ChunkCache) (p *spec.Pipeline, ds diag.Diagnostics) {
	l := &cueLoader{file: filename, src: src, cache: cache}
	defer func() {
		// cuelang.org/go is large and evolving; should it ever panic on a
		// hostile file, the author gets a finding, not a crash.
		if r := recover(); r != nil {
			p, ds = nil, append(l.ds, internalError(l, r)).Sort()
		}
	}()
	p = l.load()
	cache.keepPieces(l.pieces)
	return p, l.ds.Sort()
}

// internalError reports a panic of the CUE evaluator as a finding.
func internalError(l *cueLoader, r any) diag.Diagnostic {
	return diag.Errorf(spec.RuleSyntax, l.fileStart(), "internal error: CUE failed to evaluate this file: %v", r)
}

// cueLoader holds the state of one LoadCUE call.
type cueLoader struct {
	file string
	src  []byte
	ds   diag.Diagnostics
	// parsed is the file as parsed, used to place positions.
	parsed *ast.File
	// lines places positions of src (pos).
	lines lineIndex
	// fields indexes the fields of parsed by path; built only when needed.
	fields *cueFieldIndex
	// procs bounds how many goroutines evaluate a big plain file, and
	// chunkSize how many elements each evaluation takes (see splitPlain); 0
	// means GOMAXPROCS and cueChunkSize, a negative chunkSize no chunks.
	// Tests set them to compare chunked and whole evaluation.
	procs, chunkSize int
	// evaluateAll reads even a plain file from its evaluated value, so tests
	// can check the two ways of reading agree.
	evaluateAll bool
	// cache holds the chunks found valid by earlier loads, and the pieces
	// they parsed (nil: none); pieces are this load's, given back to the
	// cache when it is done with them.
	cache  *ChunkCache
	pieces []*cuePiece
	// pieceSize is how big the pieces a big file is parsed in are (see
	// parseCUE): 0 means cuePieceSize, a negative size no pieces. Tests
	// set it to compare the two parses.
	pieceSize int
	// evaluations and proven count the chunks CUE evaluated and those Go
	// proved valid, for the tests.
	evaluations atomic.Int64
	proven      int
	// cueOnly leaves every chunk to CUE, even those Go proves valid
	// (provablyValidTasks), for tests of the evaluation and the caches.
	cueOnly bool
	// cuePaths holds the paths CUE reported errors at, and cuePrefixes every
	// ancestor of those, so the decoder does not report the same mistake
	// again (see cueCovers).
	cuePaths, cuePrefixes map[string]bool
	// cueNotAllowed holds the paths CUE reported as not allowed.
	cueNotAllowed map[string]bool
	// evaluated is the file unified with the schema, when it is read from
	// its evaluated value (not a plain file); it places fields that
	// comprehensions and pattern constraints made (see producedField).
	evaluated cue.Value
}

func (l *cueLoader) load() *spec.Pipeline {
	f, pieces, err := parseCUE(l.file, l.src, l.workers(), l.pieceSize, l.cache)
	l.pieces = pieces
	if err != nil {
		l.addCUEErrors(err, spec.RuleSyntax)
		return nil
	}
	l.parsed = f

	if isPlainFile(f) && !l.evaluateAll {
		return l.loadPlain(f)
	}
	ctx := cuecontext.New()
	sch, err := compileSchema(ctx)
	if err != nil {
		l.ds = append(l.ds, diag.Errorf(spec.RuleSchema, l.fileStart(), "internal error: %v", err))
		return nil
	}
	return l.loadEvaluated(ctx, sch, f)
}

// workers is how many goroutines parse and evaluate a big file (procs).
func (l *cueLoader) workers() int {
	if l.procs < 1 {
		return runtime.GOMAXPROCS(0)
	}
	return l.procs
}

// compileSchema compiles the embedded schema in ctx. It is embedded and
// tested, so an error is a bug in pipec, reported as a finding rather than a
// crash.
func compileSchema(ctx *cue.Context) (cue.Value, error) {
	sch := ctx.CompileString(schema.PipelineCUE, cue.Filename(schema.PipelineFilename))
	if err := sch.Err(); err != nil {
		return cue.Value{}, fmt.Errorf("the embedded schema does not compile: %w", err)
	}
	return sch, nil
}

// cueChunkSize is how many named elements of one kind CUE evaluates at once
// (see splitPlain). Measured on generated specs: evaluating 1,000 tasks at a
// time keeps the cost linear in the number of tasks and the memory bounded by
// a chunk, where one evaluation of 100,000 tasks takes 17 times as long as
// one of 10,000 and over 1.5 GB. Chunks of 250 cost the same CPU time in all
// as chunks of 1,000 (10,000 tasks: 1,983 vs 1,976 ms for five loads, perf
// stat task-clock) and let the language server, which keeps the chunks CUE
// found valid (ChunkCache), evaluate a quarter as much after an edit
// inside one task.
const cueChunkSize = 250

// cueEvaluator evaluates plain files against the schema in a cue.Context of
// its own. One is made per chunk: a context keeps what it evaluated until it
// is dropped (a context reused for 50 chunks of a 100,000-task spec held
// 1.4 GB instead of 0.6 GB), and contexts are not shared between goroutines.
type cueEvaluator struct {
	ctx        *cue.Context
	sch        cue.Value
	constraint []ast.Decl
	err        error
}

func newCUEEvaluator() *cueEvaluator {
	e := &cueEvaluator{ctx: cuecontext.New()}
	e.sch, e.err = compileSchema(e.ctx)
	if e.err != nil {
		return e
	}
	// Every pipeline is constrained by the schema. The constraint is parsed
	// as if it were part of the schema file, so its positions are never
	// taken for the author's.
	f, err := parser.ParseFile(schema.PipelineFilename, "pipeline: [string]: #Pipeline")
	if err != nil {
		e.err = err
		return e
	}
	e.constraint = f.Decls
	return e
}

// evaluate evaluates one plain file (or a chunk of one, see splitPlain) and
// returns CUE's errors. A panic of the evaluator becomes an error: this runs
// on a goroutine of its own, where a panic would end pipec.
func (e *cueEvaluator) evaluate(f *ast.File) (err error) {
	if e.err != nil {
		return e.err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error: CUE failed to evaluate this file: %v", r)
		}
	}()
	withSchema := *f
	withSchema.Decls = append(slices.Clip(f.Decls), e.constraint...)
	return e.ctx.BuildFile(&withSchema, cue.Scope(e.sch)).Validate(cue.Concrete(true))
}

// splitPlain splits a merged plain file into files of at most size elements
// that CUE can evaluate one by one, or concurrently: the largest set of named
// elements of the pipeline (the tasks, in a big spec) is shared out, the
// first file keeping all the rest. In plain data each element is checked
// against the schema on its own, so the chunks report exactly the errors the
// whole file would. Small files, and files that are not exactly one
// pipeline, stay whole.
func splitPlain(f *ast.File, size int) []*ast.File {
	whole := []*ast.File{f}
	if size < 1 {
		return whole
	}
	// Find pipeline: NAME: {..., big: {e1, e2, ...}, ...}.
	var pf *ast.Field
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.Field); ok && plainLabel(fd.Label) == spec.KindPipeline {
			if pf != nil {
				return whole
			}
			pf = fd
		}
	}
	if pf == nil {
		return whole
	}
	ps, ok := pf.Value.(*ast.StructLit)
	if !ok || len(ps.Elts) != 1 {
		return whole
	}
	nf, ok := ps.Elts[0].(*ast.Field)
	if !ok {
		return whole
	}
	body, ok := nf.Value.(*ast.StructLit)
	if !ok {
		return whole
	}
	big := -1
	for i, d := range body.Elts {
		if fd, ok := d.(*ast.Field); ok {
			if st, ok := fd.Value.(*ast.StructLit); ok && (big < 0 || len(st.Elts) > len(body.Elts[big].(*ast.Field).Value.(*ast.StructLit).Elts)) {
				big = i
			}
		}
	}
	if big < 0 {
		return whole
	}
	bf := body.Elts[big].(*ast.Field)
	elems := bf.Value.(*ast.StructLit).Elts
	if len(elems) <= size {
		return whole
	}
	// wrap rebuilds pipeline: NAME: {decls} around decls, with fresh nodes so
	// no node is shared between the files evaluated concurrently.
	wrap := func(decls []ast.Decl) ast.Decl {
		field := func(label ast.Label, elts []ast.Decl) *ast.Field {
			return &ast.Field{Label: copyLabel(label), Value: &ast.StructLit{Elts: elts}}
		}
		return field(pf.Label, []ast.Decl{field(nf.Label, decls)})
	}
	var out []*ast.File
	for start := 0; start < len(elems); start += size {
		part := &ast.Field{Label: copyLabel(bf.Label), Value: &ast.StructLit{Elts: elems[start:min(start+size, len(elems))]}}
		c := &ast.File{Filename: f.Filename}
		if start == 0 {
			// The first chunk keeps the rest of the file and of the pipeline.
			rest := slices.Clone(body.Elts)
			rest[big] = part
			for _, d := range f.Decls {
				if d == ast.Decl(pf) {
					d = wrap(rest)
				}
				c.Decls = append(c.Decls, d)
			}
		} else {
			c.Decls = []ast.Decl{wrap([]ast.Decl{part})}
		}
		out = append(out, c)
	}
	return out
}

// copyLabel copies a label node, keeping its position.
func copyLabel(l ast.Label) ast.Label {
	switch x := l.(type) {
	case *ast.Ident:
		c := *x
		return &c
	case *ast.BasicLit:
		c := *x
		return &c
	}
	return l
}

// loadPlain evaluates a plain-data file with the schema in scope, then reads
// the pipeline from the (merged) syntax tree.
func (l *cueLoader) loadPlain(f *ast.File) *spec.Pipeline {
	merged := mergeFile(f)
	procs := l.workers()
	size := l.chunkSize
	if size == 0 {
		size = cueChunkSize
	}
	chunks := splitPlain(merged, size)
	errs := make([]error, len(chunks))
	// With the cache on, chunks found valid before (by content) are not
	// evaluated again; see ChunkCache.
	var keys [][sha256.Size]byte
	var load uint64
	if l.cache != nil {
		load = l.cache.startLoad()
		keys = make([][sha256.Size]byte, len(chunks))
	}
	// Each chunk is proven valid by Go, found in the cache or evaluated by
	// CUE on the goroutines below, while this one decodes the pipeline. The
	// decoder leaves alone what CUE reported (cueCovers), so should CUE
	// report anything, what it decoded is dropped and it decodes again.
	var proven atomic.Int64
	checks := make([]func(), len(chunks))
	for i, c := range chunks {
		checks[i] = func() {
			// A chunk of tasks that Go proves valid needs no evaluation
			// (see provablyValidTasks); the first chunk, with the rest of
			// the pipeline, always goes to CUE.
			if i > 0 && !l.cueOnly && provablyValidTasks(c) {
				proven.Add(1)
				return
			}
			if keys != nil {
				keys[i] = chunkKey(c)
				if l.cache.knownValid(keys[i], load) {
					return
				}
			}
			errs[i] = newCUEEvaluator().evaluate(c)
			l.evaluations.Add(1)
			if errs[i] == nil && keys != nil {
				l.cache.rememberValid(keys[i], load)
			}
		}
	}
	checked := make(chan struct{})
	var panicked any
	go func() {
		defer close(checked)
		panicked = runAll(procs, checks)
	}()
	before, notAllowed := len(l.ds), maps.Clone(l.cueNotAllowed)
	p := l.decodePlain(merged)
	<-checked
	if panicked != nil {
		panic(panicked) // LoadCUECached makes it a finding
	}
	l.proven += int(proven.Load())
	if slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		l.ds, l.cueNotAllowed = l.ds[:before], notAllowed
		for _, err := range errs {
			if err != nil {
				l.addCUEErrors(err, "")
			}
		}
		p = l.decodePlain(merged)
	}
	return p
}

// decodePlain reads the pipeline of a merged plain file from its syntax
// tree.
func (l *cueLoader) decodePlain(merged *ast.File) *spec.Pipeline {
	// A plain file has no definitions, hidden fields or embeddings, so its
	// top level holds only the regular fields written there.
	var pipelines []*ast.Field
	for _, d := range merged.Decls {
		fd, ok := d.(*ast.Field)
		if !ok {
			continue
		}
		name := plainLabel(fd.Label)
		if name != spec.KindPipeline {
			l.misplaced(name, func() diag.Range { return l.nodeRange(fd.Label) })
			continue
		}
		pipelines = append(pipelines, fd)
	}
	d := newCUEDecoder(l, false)
	return d.pipelines(pipelines)
}

// loadEvaluated evaluates a file that is more than plain data (references,
// comprehensions, definitions...), unifies it with the schema, and reads the
// pipeline from the evaluated value, exported back to plain syntax.
func (l *cueLoader) loadEvaluated(ctx *cue.Context, sch cue.Value, f *ast.File) *spec.Pipeline {
	v := sch.LookupPath(cue.MakePath(cue.Def("File"))).Unify(ctx.BuildFile(f))
	l.evaluated = v
	if err := v.Validate(cue.Concrete(true)); err != nil {
		l.addCUEErrors(err, "")
	}
	l.checkTopLevel(v)
	pv := v.LookupPath(cue.MakePath(cue.Str(spec.KindPipeline)))
	if !pv.Exists() {
		return newCUEDecoder(l, false).pipelines(nil)
	}
	// Wrap the exported pipelines as one field, as they are in a plain file.
	wrapper := &ast.Field{Label: ast.NewIdent(spec.KindPipeline), Value: exportValue(pv)}
	return newCUEDecoder(l, true).pipelines([]*ast.Field{wrapper})
}

// checkTopLevel reports the regular fields of an evaluated file other than
// pipeline. CUE reports them itself (#File is closed) unless something below
// such a field is wrong too, when it reports only that.
func (l *cueLoader) checkTopLevel(v cue.Value) {
	it, err := v.Fields(cue.Hidden(true))
	if err != nil {
		return
	}
	for it.Next() {
		sel := it.Selector()
		if sel.LabelType() != cue.StringLabel {
			continue
		}
		l.misplaced(sel.Unquoted(), func() diag.Range { return l.pathLabelRange([]string{sel.Unquoted()}) })
	}
}

// misplaced reports a top-level field other than pipeline, once, unless
// CUE reported it.
func (l *cueLoader) misplaced(name string, at func() diag.Range) {
	if name == spec.KindPipeline || l.cueNotAllowed[pathKey([]string{name})] {
		return
	}
	if l.cueNotAllowed == nil {
		l.cueNotAllowed = map[string]bool{}
	}
	l.cueNotAllowed[pathKey([]string{name})] = true
	l.schemaErr(at(), "%s", topLevelMessage(name))
}

// topLevelMessage explains a field written beside the pipeline.
func topLevelMessage(name string) string {
	return fmt.Sprintf("%s: field not allowed: a spec file holds only pipeline: NAME: {...}", name)
}

// exportValue turns an evaluated value back into plain syntax for the
// decoder. Structs are exported field by field: exporting a struct whole
// gives nothing but an error as soon as one field deep inside it is wrong,
// and the rest of the pipeline should still be read (and checked). A field
// in error becomes _|_, which the decoder skips (CUE reported it).
func exportValue(v cue.Value) ast.Expr {
	// A struct holding an error somewhere below is itself an error (kind
	// bottom); its fields are still listed when hidden fields are asked for
	// too (only regular ones are kept).
	if k := v.IncompleteKind(); k == cue.StructKind || k == cue.BottomKind {
		if it, err := v.Fields(cue.Hidden(true)); err == nil {
			st := &ast.StructLit{}
			for it.Next() {
				sel := it.Selector()
				// A required field left out is listed too; it was not written.
				if sel.LabelType() != cue.StringLabel || sel.ConstraintType() == cue.RequiredConstraint {
					continue
				}
				st.Elts = append(st.Elts, &ast.Field{Label: ast.NewStringLabel(sel.Unquoted()), Value: exportValue(it.Value())})
			}
			if k == cue.StructKind || len(st.Elts) > 0 {
				return st
			}
		}
	}
	// Scalars and lists are read through the value API rather than
	// Value.Syntax, which looks for doc comments through every declaration
	// of the enclosing fields: quadratic when `task: NAME:` is written
	// 10,000 times.
	if d, ok := v.Default(); ok {
		v = d
	}
	if v.Err() != nil {
		return &ast.BottomLit{}
	}
	switch v.Kind() {
	case cue.StringKind:
		if s, err := v.String(); err == nil {
			return ast.NewString(s)
		}
	case cue.BoolKind:
		if b, err := v.Bool(); err == nil {
			return ast.NewBool(b)
		}
	case cue.IntKind:
		if n, err := v.Int(nil); err == nil {
			return numberLit(token.INT, n.String())
		}
	case cue.FloatKind:
		if f, err := v.Float64(); err == nil {
			return numberLit(token.FLOAT, strconv.FormatFloat(f, 'g', -1, 64))
		}
	case cue.ListKind:
		if it, err := v.List(); err == nil {
			l := &ast.ListLit{}
			for it.Next() {
				l.Elts = append(l.Elts, exportValue(it.Value()))
			}
			return l
		}
	}
	return &ast.BottomLit{}
}

// numberLit writes a number as the parser would: a literal, negated by a
// unary minus.
func numberLit(kind token.Token, s string) ast.Expr {
	if rest, neg := strings.CutPrefix(s, "-"); neg {
		return &ast.UnaryExpr{Op: token.SUB, X: &ast.BasicLit{Kind: kind, Value: rest}}
	}
	return &ast.BasicLit{Kind: kind, Value: s}
}

// schemaErr records a schema finding.
func (l *cueLoader) schemaErr(r diag.Range, format string, args ...any) {
	l.ds = append(l.ds, diag.Errorf(spec.RuleSchema, r, format, args...))
}

// fileStart is the range of the first character of the file, for findings
// about the file as a whole.
func (l *cueLoader) fileStart() diag.Range {
	return diag.Range{Filename: l.file, Start: diag.Pos{Line: 1, Column: 1}, End: diag.Pos{Line: 1, Column: 1}}
}
