package spec

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/pipec/pipec/diag"
)

// LoadHCL parses an HCL spec holding one `pipeline "NAME" { ... }` block into the
// model. It keeps going after an error: the result is as complete as the source
// allows, and every problem found is in the diagnostics (rule "syntax" when the
// file does not parse, "schema" when it parses but breaks the grammar). The
// pipeline is nil only when the file holds no pipeline block at all.
//
// Defaults are not applied here; the compiler does that, so a value the author
// did not write stays at its zero value (or nil).
func LoadHCL(filename string, src []byte) (*Pipeline, diag.Diagnostics) {
	return loadHCL(filename, src, hclChunkSize)
}

// loadHCL is LoadHCL with the size of the pieces a large pipeline body is cut
// into for concurrent parsing; chunkSize <= 0 parses the file in one piece.
// The result never depends on chunkSize: when a cut could change a finding,
// the file is loaded again in one piece (see loadChunked).
func loadHCL(filename string, src []byte, chunkSize int) (*Pipeline, diag.Diagnostics) {
	if chunkSize > 0 && len(src) >= 2*chunkSize {
		if lay, ok := layoutHCL(src, chunkSize); ok {
			if p, ds, ok := loadChunked(filename, src, lay); ok {
				return p, ds.Sort()
			}
		}
	}
	return loadWhole(filename, src)
}

// loadWhole parses and decodes the file in one piece. When it does not parse,
// the items of the pipeline are parsed one by one if the file's brackets and
// quotes allow cutting it (see loadTolerant), so every broken item is reported
// and the sound ones are still checked.
func loadWhole(filename string, src []byte) (*Pipeline, diag.Diagnostics) {
	l := &hclLoader{file: filename}
	body, syntaxErr := l.parse(src, hcl.Pos{Line: 1, Column: 1})
	if syntaxErr {
		if lay, ok := layoutHCL(src, 1); ok {
			if p, ds, ok := loadTolerant(filename, src, lay); ok {
				return p, ds.Sort()
			}
		}
		// The parser's recovery skips text after an error, so findings about the
		// shape of what remains would mostly be cascades (a "missing" argument
		// that was in fact written but did not parse). Report the syntax errors
		// alone and still return whatever could be decoded.
		quiet := &hclLoader{file: filename}
		p := quiet.decodeFile(body, nil)
		return p, l.ds.Sort()
	}
	p := l.decodeFile(body, nil)
	return p, l.ds.Sort()
}

// hclLoader decodes one piece of HCL source. It is used by one goroutine at a
// time; the concurrent path gives each piece its own loader.
type hclLoader struct {
	file string
	ds   diag.Diagnostics
	// val holds the value being read, reused from field to field.
	val Value
	// taskRoom is where decodePipelineBody puts the tasks when it has room
	// for exactly as many as the body declares: a piece's window of the
	// array loadChunked allocates for the whole pipeline (for the loader
	// that merges the pieces, that whole array; see merge).
	taskRoom []Task
}

// parse runs the hclsyntax parser on src, which starts at position start of the
// file. It reports whether there were syntax errors; "Attribute redefined" is
// reported by the parser but is a schema problem, not a syntax one.
func (l *hclLoader) parse(src []byte, start hcl.Pos) (body *hclsyntax.Body, syntaxErr bool) {
	defer func() {
		// The hcl parser asserts its own invariants with panics; a spec must
		// never crash pipec, so such a panic becomes a syntax finding.
		if r := recover(); r != nil {
			body = &hclsyntax.Body{}
			syntaxErr = true
			l.ds = append(l.ds, diag.Errorf(RuleSyntax, l.fileStart(), "the HCL parser failed on this file: %v", r))
		}
	}()
	f, hds := hclsyntax.ParseConfig(src, l.file, start)
	// A quote or heredoc left open makes every later line look broken, and
	// the parser reports it where it gave up (the end of the line, or of the
	// file). Report it once, at its opener, and nothing after it, so one
	// mistake gives one finding in the place the mistake is.
	var openQuote *hcl.Pos
	for _, d := range hds {
		if d.Subject != nil && isOpenString(d) {
			if openQuote == nil || d.Subject.Start.Byte < openQuote.Byte {
				openQuote = &d.Subject.Start
			}
		}
	}
	if openQuote != nil {
		if r, msg, ok := unterminated(src, l.file, start); ok && r.Start.Byte <= openQuote.Byte {
			openQuote = &r.Start
			l.ds = append(l.ds, diag.Errorf(RuleSyntax, l.rng(r), "%s", msg))
			syntaxErr = true
			kept := hds[:0:0]
			for _, d := range hds {
				if !isOpenString(d) {
					kept = append(kept, d)
				}
			}
			hds = kept
		}
	}
	for _, d := range hds {
		if openQuote != nil && d.Subject != nil && d.Subject.Start.Byte > openQuote.Byte {
			syntaxErr = true
			continue
		}
		rule := RuleSyntax
		if d.Summary == "Attribute redefined" {
			rule = RuleSchema
		} else if d.Severity == hcl.DiagError {
			syntaxErr = true
		}
		l.ds = append(l.ds, l.convert(d, rule))
	}
	body, _ = f.Body.(*hclsyntax.Body)
	if body == nil {
		body = &hclsyntax.Body{}
	}
	return body, syntaxErr
}

// isOpenString reports whether d is one of the parser's findings about a
// string or heredoc that is not closed.
func isOpenString(d *hcl.Diagnostic) bool {
	return d.Summary == "Invalid multi-line string" || d.Summary == "Unterminated template string"
}

// unterminated finds the first quoted string not closed on its line, or the
// first heredoc with no closing marker, and says so at its opener.
func unterminated(src []byte, file string, start hcl.Pos) (hcl.Range, string, bool) {
	toks, _ := hclsyntax.LexConfig(src, file, start)
	for i, tk := range toks {
		switch tk.Type {
		case hclsyntax.TokenOQuote:
			for _, next := range toks[i+1:] {
				if next.Type == hclsyntax.TokenCQuote {
					break
				}
				if next.Type == hclsyntax.TokenQuotedNewline || next.Type == hclsyntax.TokenEOF {
					return tk.Range, "Unterminated string: the string opened here is not closed on its line; close it with \", or use a heredoc (<<EOT) for text on several lines", true
				}
			}
		case hclsyntax.TokenOHeredoc:
			closed := false
			for _, next := range toks[i+1:] {
				if next.Type == hclsyntax.TokenCHeredoc {
					closed = true
					break
				}
			}
			if !closed {
				marker := strings.TrimRight(string(tk.Bytes), "\r\n")
				r := tk.Range
				r.End = hcl.Pos{Line: r.Start.Line, Column: r.Start.Column + len(marker), Byte: r.Start.Byte + len(marker)}
				name := strings.TrimLeft(marker, "<-")
				return r, fmt.Sprintf("Unterminated heredoc: no line holding only %s closes the heredoc opened here by %s", name, marker), true
			}
		}
	}
	return hcl.Range{}, "", false
}

// fileStart is the range used for findings about the file as a whole.
func (l *hclLoader) fileStart() diag.Range {
	p := diag.Pos{Line: 1, Column: 1}
	return diag.Range{Filename: l.file, Start: p, End: p}
}

// convert turns an hcl diagnostic into a pipec one under the given rule.
func (l *hclLoader) convert(d *hcl.Diagnostic, rule string) diag.Diagnostic {
	sev := diag.Error
	if d.Severity == hcl.DiagWarning {
		sev = diag.Warning
	}
	msg := oneLine(d.Summary)
	if detail := oneLine(d.Detail); detail != "" {
		msg += ": " + detail
	}
	r := l.fileStart()
	if d.Subject != nil && d.Subject.Start.Line >= 1 {
		r = l.rng(*d.Subject)
	}
	return diag.Diagnostic{Rule: rule, Severity: sev, Message: msg, Range: r}
}

// oneLine folds runs of white space (newlines included) into single spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func (l *hclLoader) addHCL(hds hcl.Diagnostics) {
	for _, d := range hds {
		l.ds = append(l.ds, l.convert(d, RuleSchema))
	}
}

func (l *hclLoader) errorf(r hcl.Range, format string, args ...any) {
	l.ds = append(l.ds, diag.Errorf(RuleSchema, l.rng(r), format, args...))
}

// rng converts an hcl range; hcl columns already count characters.
func (l *hclLoader) rng(r hcl.Range) diag.Range {
	name := r.Filename
	if name == "" {
		name = l.file
	}
	return diag.Range{
		Filename: name,
		Start:    diag.Pos{Line: r.Start.Line, Column: r.Start.Column, Byte: r.Start.Byte},
		End:      diag.Pos{Line: r.End.Line, Column: r.End.Column, Byte: r.End.Byte},
	}
}

// Schemas of the grammar (docs/design.md section 3), read-only, derived from
// spec.Fields. Attribute order there is the order values are decoded in,
// which keeps decoding deterministic.
var (
	fileSchema = &hcl.BodySchema{
		Blocks: []hcl.BlockHeaderSchema{{Type: "pipeline", LabelNames: []string{"name"}}},
	}
	pipelineSchema  = hclSchema(KindPipeline)
	scheduleSchema  = hclSchema(KindSchedule)
	budgetSchema    = hclSchema(KindRetryBudget)
	poolSchema      = hclSchema(KindPool)
	errorSchema     = hclSchema(KindError)
	retrySchema     = hclSchema(KindRetry)
	taskSchema      = hclSchema(KindTask)
	heartbeatSchema = hclSchema(KindHeartbeat)
	failoverSchema  = hclSchema(KindFailover)
	checkSchema     = hclSchema(KindCheck)
	sinkSchema      = hclSchema(KindSink)
	publishSchema   = hclSchema(KindPublish)
)

// hclSchema is the body schema of an element kind: its plain fields are
// attributes, its nested elements blocks (labelled by name when Labelled).
func hclSchema(kind string) *hcl.BodySchema {
	s := &hcl.BodySchema{}
	for _, f := range fieldTable[kind] {
		switch {
		case f.Nested == "":
			s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: f.Name, Required: f.Required})
		case f.Labelled:
			s.Blocks = append(s.Blocks, hcl.BlockHeaderSchema{Type: f.Name, LabelNames: []string{"name"}})
		default:
			s.Blocks = append(s.Blocks, hcl.BlockHeaderSchema{Type: f.Name})
		}
	}
	return s
}

// blockKinds names each labelled block type in messages.
var blockKinds = map[string]string{
	"pipeline": "pipeline",
	"pool":     "pool",
	"error":    "error class",
	"retry":    "retry policy",
	"task":     "task",
	"check":    "check",
	"sink":     "sink",
	"publish":  "publish",
}

// decodeFile decodes a whole file body. When parts is not nil, the pipeline
// block's own body is ignored and the given, already decoded, parts are used
// instead (the body was cut into pieces, see hcl_split.go).
func (l *hclLoader) decodeFile(body *hclsyntax.Body, parts []*bodyPart) *Pipeline {
	// Content reports unknown items and a pipeline block with the wrong number
	// of labels; the pipeline itself is taken from the raw blocks so that one
	// with a missing name still has its body checked.
	_, hds := body.Content(fileSchema)
	l.addHCL(hds)
	var block *hclsyntax.Block
	for _, b := range body.Blocks {
		if b.Type != "pipeline" {
			continue
		}
		if block != nil {
			l.errorf(b.DefRange(), "Duplicate pipeline block: a spec file holds one pipeline, and one was already declared at %s", l.rng(block.DefRange()))
			continue
		}
		block = b
	}
	if block == nil {
		r := l.fileStart()
		l.ds = append(l.ds, diag.Errorf(RuleSchema, r, `Missing pipeline block: a spec file must hold one pipeline "NAME" { ... } block`))
		return nil
	}
	p := &Pipeline{File: l.file, Range: l.rng(block.DefRange())}
	if len(block.Labels) > 0 {
		p.Name = block.Labels[0]
		p.NameRange = l.rng(block.LabelRanges[0])
		if !ValidName(p.Name) {
			l.errorf(block.LabelRanges[0], "%s", NameError("pipeline", p.Name))
		}
	}
	if parts == nil {
		if block.Body == nil {
			return p
		}
		parts = []*bodyPart{l.decodePipelineBody(block.Body)}
	}
	l.merge(p, parts)
	return p
}

// bodyPart is what one piece of a pipeline body declares, before pieces are
// merged and duplicates across them are found.
type bodyPart struct {
	p Pipeline
	// attrs are the pipeline's own attributes this piece sets, in schema order.
	attrs     []partAttr
	schedules []*Schedule
	budgets   []*RetryBudget
	// unknownAttr is set when the piece sets an attribute the pipeline does
	// not have (see loadChunked).
	unknownAttr bool
}

// partAttr is a pipeline attribute a piece sets, with the value read. It
// holds no node of the piece's tree, whose memory is reused (fastArena).
type partAttr struct {
	name      string
	nameRange hcl.Range
	f         *Field
	v         Value
	ok        bool
}

// decodePipelineBody decodes the items of (a piece of) a pipeline body.
func (l *hclLoader) decodePipelineBody(body *hclsyntax.Body) *bodyPart {
	part := &bodyPart{}
	p := &part.p
	for name := range body.Attributes {
		if !schemaHasAttr(pipelineSchema, name) {
			part.unknownAttr = true
		}
	}
	blocks := l.content(body, pipelineSchema, KindPipeline, p, &p.Attrs, func(a *hclsyntax.Attribute, f *Field, v *Value, ok bool) {
		part.attrs = append(part.attrs, partAttr{name: a.Name, nameRange: a.NameRange, f: f, v: *v, ok: ok})
	})
	ntasks := 0
	for _, b := range blocks {
		if b.Type == "task" {
			ntasks++
		}
	}
	switch {
	case ntasks > 0 && cap(l.taskRoom) == ntasks:
		p.Tasks = l.taskRoom[:0]
	case ntasks > 0:
		p.Tasks = make([]Task, 0, ntasks)
	}
	for _, b := range blocks {
		switch b.Type {
		case "schedule":
			part.schedules = append(part.schedules, l.schedule(b))
		case "retry_budget":
			part.budgets = append(part.budgets, l.budget(b))
		case "pool":
			p.Pools = append(p.Pools, Pool{})
			l.pool(b, &p.Pools[len(p.Pools)-1])
		case "error":
			p.Errors = append(p.Errors, ErrorClass{})
			l.errorClass(b, &p.Errors[len(p.Errors)-1])
		case "retry":
			p.Retries = append(p.Retries, RetryPolicy{})
			l.retry(b, &p.Retries[len(p.Retries)-1])
		case "task":
			p.Tasks = append(p.Tasks, Task{})
			l.task(b, &p.Tasks[len(p.Tasks)-1])
		case "check":
			p.Checks = append(p.Checks, Check{})
			l.check(b, &p.Checks[len(p.Checks)-1])
		case "sink":
			p.Sinks = append(p.Sinks, Sink{})
			l.sink(b, &p.Sinks[len(p.Sinks)-1])
		case "publish":
			p.Publishes = append(p.Publishes, Publish{})
			l.publish(b, &p.Publishes[len(p.Publishes)-1])
		}
	}
	return part
}

// merge joins the decoded pieces of the pipeline body in source order into p,
// reporting what is declared twice: an attribute, a single block, or two
// labelled blocks of one type with one name. The second of a pair points at
// the first and is dropped, so later stages do not report it again.
func (l *hclLoader) merge(p *Pipeline, parts []*bodyPart) {
	set := map[string]hcl.Range{} // where each attribute was set first
	if len(parts) == 1 {
		// Take the slices as they are rather than copy them.
		part := parts[0].p
		p.Pools, p.Errors, p.Retries, p.Tasks = part.Pools, part.Errors, part.Retries, part.Tasks
		p.Checks, p.Sinks, p.Publishes = part.Checks, part.Sinks, part.Publishes
		parts[0].p = Pipeline{Attrs: part.Attrs}
	} else if tasksInPlace(l.taskRoom, parts) {
		p.Tasks = l.taskRoom[:cap(l.taskRoom)]
		for _, part := range parts {
			part.p.Tasks = nil // already in p.Tasks
		}
	} else {
		n := 0
		for _, part := range parts {
			n += len(part.p.Tasks)
		}
		if n > 0 {
			p.Tasks = make([]Task, 0, n)
		}
	}
	for _, part := range parts {
		for _, pa := range part.attrs {
			if first, dup := set[pa.name]; dup {
				// The parser reports this within one piece; this is the same
				// finding across pieces.
				l.errorf(pa.nameRange, "Attribute redefined: The argument %q was already set at %s. Each argument may be set only once.", pa.name, first.String())
				continue
			}
			set[pa.name] = pa.nameRange
			if pa.ok {
				pa.f.set(p, &pa.v)
			}
			p.Attrs.Set(pa.name, part.p.Attrs.Ranges[pa.name])
			if part.p.Refused(pa.name) {
				p.Attrs.Refuse(pa.name)
			}
		}
		for _, s := range part.schedules {
			if p.Schedule != nil {
				l.ds = append(l.ds, diag.Errorf(RuleSchema, s.Range, "Duplicate schedule block: a pipeline has one schedule, and one was already declared at %s", p.Schedule.Range))
				continue
			}
			p.Schedule = s
			p.Attrs.Set("schedule", s.Range)
		}
		for _, b := range part.budgets {
			if p.RetryBudget != nil {
				l.ds = append(l.ds, diag.Errorf(RuleSchema, b.Range, "Duplicate retry_budget block: a pipeline has one retry budget, and one was already declared at %s", p.RetryBudget.Range))
				continue
			}
			p.RetryBudget = b
			p.Attrs.Set("retry_budget", b.Range)
		}
		p.Pools = append(p.Pools, part.p.Pools...)
		p.Errors = append(p.Errors, part.p.Errors...)
		p.Retries = append(p.Retries, part.p.Retries...)
		p.Tasks = append(p.Tasks, part.p.Tasks...)
		p.Checks = append(p.Checks, part.p.Checks...)
		p.Sinks = append(p.Sinks, part.p.Sinks...)
		p.Publishes = append(p.Publishes, part.p.Publishes...)
	}
	p.Pools = dedupe(l, "pool", p.Pools, func(x *Pool) *Named { return &x.Named })
	p.Errors = dedupe(l, "error", p.Errors, func(x *ErrorClass) *Named { return &x.Named })
	p.Retries = dedupe(l, "retry", p.Retries, func(x *RetryPolicy) *Named { return &x.Named })
	p.Tasks = dedupe(l, "task", p.Tasks, func(x *Task) *Named { return &x.Named })
	p.Checks = dedupe(l, "check", p.Checks, func(x *Check) *Named { return &x.Named })
	p.Sinks = dedupe(l, "sink", p.Sinks, func(x *Sink) *Named { return &x.Named })
	p.Publishes = dedupe(l, "publish", p.Publishes, func(x *Publish) *Named { return &x.Named })
}

// tasksInPlace reports whether the parts' tasks fill room, one part's after
// another's, as loadChunked lays them out when the layout counted right.
func tasksInPlace(room []Task, parts []*bodyPart) bool {
	room = room[:cap(room)]
	next := 0
	for _, part := range parts {
		ts := part.p.Tasks
		if len(ts) == 0 {
			continue
		}
		if next+len(ts) > len(room) || &room[next] != &ts[0] {
			return false
		}
		next += len(ts)
	}
	return next > 0 && next == len(room)
}

// dedupe drops every element whose name an earlier element of the same block
// type already has, reporting it at the second with the first's position.
func dedupe[T any](l *hclLoader, blockType string, xs []T, named func(*T) *Named) []T {
	if len(xs) < 2 {
		return xs
	}
	first := make(map[string]int, len(xs))
	out := xs[:0]
	for i := range xs {
		n := named(&xs[i])
		if prev, dup := first[n.Name]; dup {
			l.ds = append(l.ds, diag.Errorf(RuleSchema, n.NameRange,
				"Duplicate %s block: a %s named %q was already declared at %s; names must be unique", blockType, blockKinds[blockType], n.Name, named(&out[prev]).Range))
			continue
		}
		first[n.Name] = len(out)
		out = append(out, xs[i])
	}
	return out
}

// named fills the Named header of a labelled block.
func (l *hclLoader) named(b *hclsyntax.Block) Named {
	n := Named{Range: l.rng(b.DefRange())}
	if len(b.Labels) > 0 {
		n.Name = b.Labels[0]
		n.NameRange = l.rng(b.LabelRanges[0])
		if !ValidName(n.Name) {
			l.errorf(b.LabelRanges[0], "%s", NameError(blockKinds[b.Type], n.Name))
		}
	}
	return n
}

// content applies the schema of an element kind to a block body and reads
// every plain field written, in table order, into target (see Field.set),
// after recording its range in attrs; after, when not nil, is called with
// each. It returns the nested blocks the schema knows, with the right number
// of labels.
//
// Findings about the body's shape (unknown or missing arguments, unknown
// blocks, wrong labels) are hcl's own, from Body.Content. Content allocates
// several maps per call, so it runs only when a cheap pass over the body has
// seen something wrong: on a clean body it would report nothing.
func (l *hclLoader) content(body *hclsyntax.Body, schema *hcl.BodySchema, kind string, target any, attrs *Attrs, after func(a *hclsyntax.Attribute, f *Field, v *Value, ok bool)) []*hclsyntax.Block {
	clean := true
	for name := range body.Attributes {
		if !schemaHasAttr(schema, name) {
			clean = false
			break
		}
	}
	for _, s := range schema.Attributes {
		if s.Required && body.Attributes[s.Name] == nil {
			clean = false
		}
	}
	nblocks := 0
	for _, b := range body.Blocks {
		if labels, known := schemaLabels(schema, b.Type); known && labels == len(b.Labels) {
			nblocks++
		} else {
			clean = false
		}
	}
	if !clean {
		_, hds := body.Content(schema)
		l.addHCL(hds)
	}
	if attrs.Ranges == nil && len(body.Attributes) > 0 {
		attrs.Ranges = make(map[string]diag.Range, len(body.Attributes))
	}
	fields := fieldTable[kind]
	for i := range fields {
		f := &fields[i]
		if f.Nested != "" {
			continue
		}
		a := body.Attributes[f.Name]
		if a == nil {
			continue
		}
		attrs.Set(a.Name, l.rng(a.SrcRange))
		before := len(l.ds)
		v := &l.val
		*v = Value{}
		ok := l.read(f, a, attrs, v)
		if ok {
			f.set(target, v)
		}
		if after != nil {
			after(a, f, v, ok)
		}
		if l.ds[before:].HasErrors() {
			attrs.Refuse(a.Name)
		}
	}
	if nblocks == 0 {
		return nil
	}
	blocks := make([]*hclsyntax.Block, 0, nblocks)
	for _, b := range body.Blocks {
		if labels, known := schemaLabels(schema, b.Type); known && labels == len(b.Labels) {
			blocks = append(blocks, b)
		}
	}
	return blocks
}

func schemaHasAttr(schema *hcl.BodySchema, name string) bool {
	for _, s := range schema.Attributes {
		if s.Name == name {
			return true
		}
	}
	return false
}

// schemaLabels returns how many labels a known block type takes.
func schemaLabels(schema *hcl.BodySchema, typ string) (int, bool) {
	for _, s := range schema.Blocks {
		if s.Type == typ {
			return len(s.LabelNames), true
		}
	}
	return 0, false
}

func (l *hclLoader) schedule(b *hclsyntax.Block) *Schedule {
	s := &Schedule{Range: l.rng(b.DefRange())}
	l.content(b.Body, scheduleSchema, KindSchedule, s, &s.Attrs, nil)
	return s
}

func (l *hclLoader) budget(b *hclsyntax.Block) *RetryBudget {
	rb := &RetryBudget{Range: l.rng(b.DefRange())}
	l.content(b.Body, budgetSchema, KindRetryBudget, rb, &rb.Attrs, nil)
	return rb
}

func (l *hclLoader) pool(b *hclsyntax.Block, p *Pool) {
	p.Named = l.named(b)
	l.content(b.Body, poolSchema, KindPool, p, &p.Attrs, nil)
}

func (l *hclLoader) errorClass(b *hclsyntax.Block, e *ErrorClass) {
	e.Named = l.named(b)
	l.content(b.Body, errorSchema, KindError, e, &e.Attrs, nil)
}

func (l *hclLoader) retry(b *hclsyntax.Block, r *RetryPolicy) {
	r.Named = l.named(b)
	l.content(b.Body, retrySchema, KindRetry, r, &r.Attrs, nil)
}

func (l *hclLoader) task(b *hclsyntax.Block, t *Task) {
	t.Named = l.named(b)
	blocks := l.content(b.Body, taskSchema, KindTask, t, &t.Attrs, nil)
	for _, nb := range blocks {
		bb := nb.Body
		switch nb.Type {
		case "heartbeat":
			h := &Heartbeat{Range: l.rng(nb.DefRange())}
			l.content(bb, heartbeatSchema, KindHeartbeat, h, &h.Attrs, nil)
			if t.Heartbeat != nil {
				l.errorf(nb.DefRange(), "Duplicate heartbeat block: a task has one heartbeat, and one was already declared at %s", t.Heartbeat.Range)
				continue
			}
			t.Heartbeat = h
			t.Attrs.Set("heartbeat", h.Range)
		case "failover":
			f := &Failover{Range: l.rng(nb.DefRange())}
			l.content(bb, failoverSchema, KindFailover, f, &f.Attrs, nil)
			if t.Failover != nil {
				l.errorf(nb.DefRange(), "Duplicate failover block: a task has one failover, and one was already declared at %s", t.Failover.Range)
				continue
			}
			t.Failover = f
			t.Attrs.Set("failover", f.Range)
		}
	}
}

func (l *hclLoader) check(b *hclsyntax.Block, c *Check) {
	c.Named = l.named(b)
	l.content(b.Body, checkSchema, KindCheck, c, &c.Attrs, nil)
}

func (l *hclLoader) sink(b *hclsyntax.Block, s *Sink) {
	s.Named = l.named(b)
	l.content(b.Body, sinkSchema, KindSink, s, &s.Attrs, nil)
}

func (l *hclLoader) publish(b *hclsyntax.Block, p *Publish) {
	p.Named = l.named(b)
	l.content(b.Body, publishSchema, KindPublish, p, &p.Attrs, nil)
}

// read reads the value of attribute a, written for field f, into v as
// f.Value says, reporting what is wrong with it. It reports whether v holds
// a value to set.
func (l *hclLoader) read(f *Field, a *hclsyntax.Attribute, attrs *Attrs, v *Value) bool {
	var ok bool
	switch f.Value {
	case ValString:
		v.Str, ok = l.str(a.Name, a.Expr)
	case ValColumn:
		v.Str, ok = l.str(a.Name, a.Expr)
		if ok && v.Str == "" {
			l.errorf(a.Expr.Range(), "Invalid value for %q: must name a column, got an empty string", a.Name)
			return false
		}
	case ValBool:
		v.Bool, ok = l.boolean(a)
	case ValInt:
		v.Int, ok = l.integer(a.Name, a.Expr, f.Min, f.Max)
	case ValFloat:
		v.Float, ok = l.float(a)
	case ValDuration:
		v.Dur, ok = l.duration(a)
	case ValTime:
		var s string
		if s, ok = l.str(a.Name, a.Expr); ok {
			t, err := ParseTime(s)
			if err != nil {
				l.errorf(a.Expr.Range(), "%s: %v", a.Name, err)
			}
			v.Time = t
		}
	case ValEnum:
		v.Str, ok = l.enum(a, f.Enum...)
	case ValRef:
		v.Ref = l.ref(a, f.RefKind)
		ok = v.Ref != nil
	case ValRefs:
		v.Refs, ok = l.refs(a, f.RefKind), true
	case ValStrings:
		v.Strs, ok = l.strings(a), true
	case ValCommand:
		v.Strs, ok = l.command(a), true
	case ValInts:
		l.list(a, "numbers", func(el hcl.Expression) {
			if n, ok := l.integer(a.Name, el, f.Min, f.Max); ok {
				v.Ints = append(v.Ints, n)
			}
		})
		ok = true
	case ValInputs:
		l.list(a, "strings", func(el hcl.Expression) {
			s, ok := l.str(a.Name, el)
			if !ok {
				return
			}
			name, off, err := ParseInput(s)
			if err != nil {
				l.errorf(el.Range(), "%v", err)
				return
			}
			v.Inputs = append(v.Inputs, Input{Artifact: name, Offset: off, Range: l.rng(el.Range())})
		})
		ok = true
	case ValEnv:
		v.Env, ok = l.env(a, attrs), true
	}
	return ok
}

// ---- values ----

// value evaluates a literal expression. Specs are data: anything but a
// literal (a reference, a function call, arithmetic, an interpolation) is
// refused with a message that says so. Besides keeping specs plain, this
// bounds the work: evaluating "${1e99999999}" would print a hundred million
// digits.
func (l *hclLoader) value(name string, e hcl.Expression) (cty.Value, bool) {
	// Fast paths for the literals nearly every spec is made of: a quoted string
	// with no interpolation, and a number or bool.
	switch x := e.(type) {
	case *hclsyntax.LiteralValueExpr:
		if x.Val.IsKnown() && !x.Val.IsNull() {
			return x.Val, true
		}
	case *hclsyntax.TemplateExpr:
		if len(x.Parts) == 1 {
			if lit, ok := x.Parts[0].(*hclsyntax.LiteralValueExpr); ok && lit.Val.Type() == cty.String && lit.Val.IsKnown() && !lit.Val.IsNull() {
				return lit.Val, true
			}
		}
	}
	if !l.literal(name, e) {
		return cty.NilVal, false
	}
	v, hds := e.Value(nil)
	if hds.HasErrors() {
		l.addHCL(hds)
		return cty.NilVal, false
	}
	if !v.IsWhollyKnown() {
		l.errorf(e.Range(), "Invalid value for %q: the value is not known until run time; write a literal", name)
		return cty.NilVal, false
	}
	if v.IsNull() {
		l.errorf(e.Range(), "Invalid value for %q: null is not allowed; leave the argument out instead", name)
		return cty.NilVal, false
	}
	return v, true
}

// literal reports whether e is made only of literals: strings without
// interpolation, numbers (possibly negated), bools, null, and lists and maps of
// those. Otherwise it reports why not, at the offending part.
func (l *hclLoader) literal(name string, e hcl.Expression) bool {
	const only = "Only literal values are allowed"
	switch x := e.(type) {
	case *hclsyntax.LiteralValueExpr:
		return true
	case *hclsyntax.ParenthesesExpr:
		return l.literal(name, x.Expression)
	case *hclsyntax.TemplateExpr:
		for _, part := range x.Parts {
			// An interpolated literal ("a${1e99999999}") is a part of its
			// own, and printing it could take minutes: only text counts.
			if lit, ok := part.(*hclsyntax.LiteralValueExpr); !ok || lit.Val.Type() != cty.String {
				return l.interpolation(name, part)
			}
		}
		return true
	case *hclsyntax.TemplateWrapExpr:
		return l.interpolation(name, x.Wrapped)
	case *hclsyntax.TupleConsExpr:
		ok := true
		for _, el := range x.Exprs {
			ok = l.literal(name, el) && ok
		}
		return ok
	case *hclsyntax.ObjectConsExpr:
		ok := true
		for _, item := range x.Items {
			ok = l.literal(name, item.KeyExpr) && ok
			ok = l.literal(name, item.ValueExpr) && ok
		}
		return ok
	case *hclsyntax.ObjectConsKeyExpr:
		// A naked identifier key (MODE = ...) is a string, not a reference.
		if !x.ForceNonLiteral && hcl.ExprAsKeyword(x.Wrapped) != "" {
			return true
		}
		// Otherwise only a quoted string: hcl would print any other key as
		// a string, and a number such as 1e99999999 takes minutes to print.
		if t, ok := x.Wrapped.(*hclsyntax.TemplateExpr); ok {
			return l.literal(name, t)
		}
		if _, ok := x.Wrapped.(*hclsyntax.ScopeTraversalExpr); ok {
			return l.literal(name, x.Wrapped)
		}
	case *hclsyntax.UnaryOpExpr:
		if lit, isLit := x.Val.(*hclsyntax.LiteralValueExpr); isLit && x.Op == hclsyntax.OpNegate && lit.Val.Type() == cty.Number {
			return true
		}
	case *hclsyntax.ScopeTraversalExpr:
		l.errorf(x.SrcRange, "%s: %q refers to %q; a pipec spec holds plain strings, numbers, bools, lists and maps, with no variables", only, name, traversalString(x.Traversal))
		return false
	case *hclsyntax.FunctionCallExpr:
		l.errorf(x.NameRange, "%s: %q calls the function %q; a pipec spec has no functions, write the value itself", only, name, x.Name)
		return false
	}
	l.errorf(e.Range(), "%s: %q is computed by an expression; write the value itself", only, name)
	return false
}

// interpolation reports an expression interpolated into a string.
func (l *hclLoader) interpolation(name string, part hclsyntax.Expression) bool {
	if vars := part.Variables(); len(vars) > 0 {
		return l.literal(name, &hclsyntax.ScopeTraversalExpr{Traversal: vars[0], SrcRange: vars[0].SourceRange()})
	}
	l.errorf(part.Range(), "Only literal values are allowed: %q interpolates an expression into a string; write the string itself", name)
	return false
}

// traversalString renders a variable reference such as var.x for a message.
func traversalString(t hcl.Traversal) string {
	var b strings.Builder
	for _, step := range t {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			b.WriteString(s.Name)
		case hcl.TraverseAttr:
			b.WriteString("." + s.Name)
		default:
			b.WriteString("[...]")
		}
	}
	return b.String()
}

// as converts v to the wanted type, reporting the mismatch the way gohcl does.
func (l *hclLoader) as(name string, e hcl.Expression, v cty.Value, want cty.Type) (cty.Value, bool) {
	if v.Type().Equals(want) {
		return v, true
	}
	if v.Type() == cty.Number && want == cty.String && hugeNumber(v.AsBigFloat()) {
		l.errorf(e.Range(), "Invalid value for %q: a string is required, and this number is too large to write as one", name)
		return cty.NilVal, false
	}
	c, err := convert.Convert(v, want)
	if err != nil {
		l.errorf(e.Range(), "Incorrect attribute value type: Inappropriate value for attribute %q: %s.", name, err.Error())
		return cty.NilVal, false
	}
	if c.IsNull() {
		l.errorf(e.Range(), "Invalid value for %q: null is not allowed", name)
		return cty.NilVal, false
	}
	return c, true
}

func (l *hclLoader) str(name string, e hcl.Expression) (string, bool) {
	v, ok := l.value(name, e)
	if !ok {
		return "", false
	}
	v, ok = l.as(name, e, v, cty.String)
	if !ok {
		return "", false
	}
	return v.AsString(), true
}

func (l *hclLoader) boolean(a *hclsyntax.Attribute) (bool, bool) {
	v, ok := l.value(a.Name, a.Expr)
	if !ok {
		return false, false
	}
	v, ok = l.as(a.Name, a.Expr, v, cty.Bool)
	if !ok {
		return false, false
	}
	return v.True(), true
}

// number returns a literal's numeric value.
func (l *hclLoader) number(name string, e hcl.Expression) (*big.Float, bool) {
	v, ok := l.value(name, e)
	if !ok {
		return nil, false
	}
	v, ok = l.as(name, e, v, cty.Number)
	if !ok {
		return nil, false
	}
	return v.AsBigFloat(), true
}

// integer returns a whole number in [min, max].
func (l *hclLoader) integer(name string, e hcl.Expression, min, max int64) (int, bool) {
	f, ok := l.number(name, e)
	if !ok {
		return 0, false
	}
	if !f.IsInt() {
		l.errorf(e.Range(), "Invalid value for %q: must be a whole number, got %s", name, fmtNumber(f))
		return 0, false
	}
	n, acc := f.Int64()
	if acc == big.Exact && n >= min && n <= max {
		return int(n), true
	}
	switch {
	case max < math.MaxInt32:
		l.errorf(e.Range(), "Invalid value for %q: must be between %d and %d, got %s%s", name, min, max, fmtNumber(f), BoundHint(name))
	case f.Cmp(new(big.Float).SetInt64(min)) < 0:
		l.errorf(e.Range(), "Invalid value for %q: must be at least %d, got %s%s", name, min, fmtNumber(f), BoundHint(name))
	default:
		l.errorf(e.Range(), "Invalid value for %q: must be at most %d, got %s", name, max, fmtNumber(f))
	}
	return 0, false
}

// hugeNumber reports whether printing f in full would take more than a few
// hundred digits (HCL numbers can carry exponents of hundreds of millions).
func hugeNumber(f *big.Float) bool {
	exp := f.MantExp(nil)
	return f.IsInf() || exp > 1100 || exp < -1100
}

// fmtNumber prints a number for a message, briefly whatever its size.
func fmtNumber(f *big.Float) string {
	if f.IsInf() {
		return f.String()
	}
	x, _ := f.Float64()
	if math.IsInf(x, 0) || (x == 0 && f.Sign() != 0) {
		return "a number out of range"
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// float returns a finite, non-negative number.
func (l *hclLoader) float(a *hclsyntax.Attribute) (float64, bool) {
	f, ok := l.number(a.Name, a.Expr)
	if !ok {
		return 0, false
	}
	v, _ := f.Float64()
	if math.IsInf(v, 0) {
		l.errorf(a.Expr.Range(), "Invalid value for %q: must be a finite number", a.Name)
		return 0, false
	}
	if f.Sign() < 0 {
		l.errorf(a.Expr.Range(), "Invalid value for %q: must not be negative, got %s", a.Name, fmtNumber(f))
		return 0, false
	}
	return v, true
}

func (l *hclLoader) duration(a *hclsyntax.Attribute) (Duration, bool) {
	s, ok := l.str(a.Name, a.Expr)
	if !ok {
		return 0, false
	}
	d, err := ParseField(a.Name, s)
	if err != nil {
		l.errorf(a.Expr.Range(), "%s: %v", a.Name, err)
		return 0, false
	}
	return d, true
}

// enum returns a string that must be one of allowed.
func (l *hclLoader) enum(a *hclsyntax.Attribute, allowed ...string) (string, bool) {
	s, ok := l.str(a.Name, a.Expr)
	if !ok {
		return "", false
	}
	for _, v := range allowed {
		if s == v {
			return s, true
		}
	}
	quoted := make([]string, len(allowed))
	for i, v := range allowed {
		quoted[i] = fmt.Sprintf("%q", v)
	}
	l.errorf(a.Expr.Range(), "Invalid value for %q: %q is not allowed; use one of %s", a.Name, s, strings.Join(quoted, ", "))
	return "", false
}

// list calls each for every element of a list attribute. A list written as
// [...] gives each element its own expression, hence its own range; any other
// expression that evaluates to a list gives every element the whole range.
func (l *hclLoader) list(a *hclsyntax.Attribute, of string, each func(el hcl.Expression)) {
	if tup, ok := a.Expr.(*hclsyntax.TupleConsExpr); ok {
		for _, el := range tup.Exprs {
			each(el)
		}
		return
	}
	v, ok := l.value(a.Name, a.Expr)
	if !ok {
		return
	}
	if !v.Type().IsListType() && !v.Type().IsTupleType() && !v.Type().IsSetType() {
		l.errorf(a.Expr.Range(), "Incorrect attribute value type: Inappropriate value for attribute %q: a list of %s is required.", a.Name, of)
		return
	}
	rng := a.Expr.Range()
	for it := v.ElementIterator(); it.Next(); {
		_, ev := it.Element()
		each(&hclsyntax.LiteralValueExpr{Val: ev, SrcRange: rng})
	}
}

// strings returns a list of strings.
func (l *hclLoader) strings(a *hclsyntax.Attribute) []string {
	var out []string
	l.list(a, "strings", func(el hcl.Expression) {
		if s, ok := l.str(a.Name, el); ok {
			out = append(out, s)
		}
	})
	return out
}

// command returns a program and its arguments; it must name a program.
func (l *hclLoader) command(a *hclsyntax.Attribute) []string {
	cmd := l.strings(a)
	if cmd == nil {
		if tup, ok := a.Expr.(*hclsyntax.TupleConsExpr); ok && len(tup.Exprs) == 0 {
			l.errorf(a.Expr.Range(), "Invalid value for %q: the list is empty; give the program to run and its arguments, such as [\"./extract.sh\"]", a.Name)
		}
		return nil
	}
	if cmd[0] == "" {
		l.errorf(a.Expr.Range(), "Invalid value for %q: the program name is empty", a.Name)
	}
	return cmd
}

// ref returns one name reference, validated with ValidName.
func (l *hclLoader) ref(a *hclsyntax.Attribute, kind string) *Ref {
	r, ok := l.refExpr(a.Name, a.Expr, kind)
	if !ok {
		return nil
	}
	return &r
}

func (l *hclLoader) refExpr(name string, e hcl.Expression, kind string) (Ref, bool) {
	s, ok := l.str(name, e)
	if !ok {
		return Ref{}, false
	}
	if kind == EnvVarKind {
		if !l.envKey(s, e.Range()) {
			return Ref{}, false
		}
	} else if kind == LabelKind {
		if !ValidLabel(s) {
			l.errorf(e.Range(), "%s", LabelError(s))
			return Ref{}, false
		}
	} else if !ValidName(s) {
		l.errorf(e.Range(), "%s", NameError(kind, s))
		return Ref{}, false
	}
	return Ref{Name: s, Range: l.rng(e.Range())}, true
}

// refs returns a list of name references, each with its element's range, nil
// when there is none. A written list gets its room at once: growing it
// reference by reference cost as much as reading the references.
func (l *hclLoader) refs(a *hclsyntax.Attribute, kind string) []Ref {
	var out []Ref
	if tup, ok := a.Expr.(*hclsyntax.TupleConsExpr); ok && len(tup.Exprs) > 0 {
		out = make([]Ref, 0, len(tup.Exprs))
	}
	l.list(a, "strings", func(el hcl.Expression) {
		if r, ok := l.refExpr(a.Name, el, kind); ok {
			out = append(out, r)
		}
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// env returns a map of plain strings. Each entry's range (key through value)
// is recorded as "env.KEY".
func (l *hclLoader) env(a *hclsyntax.Attribute, attrs *Attrs) map[string]string {
	obj, ok := a.Expr.(*hclsyntax.ObjectConsExpr)
	if !ok {
		v, ok := l.value(a.Name, a.Expr)
		if !ok {
			return nil
		}
		v, ok = l.as(a.Name, a.Expr, v, cty.Map(cty.String))
		if !ok {
			return nil
		}
		var out map[string]string
		for it := v.ElementIterator(); it.Next(); {
			k, ev := it.Element()
			if ev.IsNull() {
				l.errorf(a.Expr.Range(), "Invalid value for %q: null is not allowed", a.Name)
				continue
			}
			if l.envKey(k.AsString(), a.Expr.Range()) {
				if out == nil {
					out = map[string]string{}
				}
				out[k.AsString()] = ev.AsString()
				attrs.Set("env."+k.AsString(), l.rng(a.SrcRange))
			}
		}
		return out
	}
	// An empty map stays nil, as in the CUE loader.
	var out map[string]string
	first := make(map[string]hcl.Range, len(obj.Items))
	for _, item := range obj.Items {
		key, ok := l.str(a.Name, item.KeyExpr)
		if !ok {
			continue
		}
		if !l.envKey(key, item.KeyExpr.Range()) {
			continue
		}
		if prev, dup := first[key]; dup {
			l.errorf(item.KeyExpr.Range(), "Duplicate env key: %q was already set at %s", key, l.rng(prev))
			continue
		}
		first[key] = item.KeyExpr.Range()
		val, ok := l.str(a.Name+"."+key, item.ValueExpr)
		if !ok {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(obj.Items))
		}
		out[key] = val
		attrs.Set("env."+key, l.rng(hcl.RangeBetween(item.KeyExpr.Range(), item.ValueExpr.Range())))
	}
	return out
}

// envKey validates the name of an environment variable a task gets (env keys
// and secret_env): the shell's rule, not ValidName's, since '-' cannot appear
// in a variable name and a leading '_' can.
func (l *hclLoader) envKey(key string, r hcl.Range) bool {
	if !ValidEnvName(key) {
		l.errorf(r, "invalid environment variable name %q: use letters, digits and '_', not starting with a digit", key)
		return false
	}
	return true
}
