package cuespec

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/token"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
)

// cueDecoder reads the model from plain CUE syntax: the author's own tree for
// a plain file (positions come from its nodes), or the evaluated value
// exported back to syntax (positions come from the author's fields at the
// same path, since exported nodes have none of their own).
//
// It trusts CUE for shapes: a value of the wrong type is skipped, and
// reported only where CUE reported nothing at or around its path (see
// report), so nothing is dropped in silence and nothing is said twice. It
// adds what CUE cannot know: durations, timestamps, names and inputs.
type cueDecoder struct {
	l        *cueLoader
	exported bool
	// path is the field path of the value being read, as CUE spells it in
	// its errors (pipeline.NAME.task.NAME.timeout).
	path []string
	// fields is spec.Fields, built once.
	fields map[string][]spec.Field
	// val holds the value being read, reused from field to field.
	val spec.Value
}

func newCUEDecoder(l *cueLoader, exported bool) *cueDecoder {
	return &cueDecoder{l: l, exported: exported, fields: fieldTable}
}

// enter pushes a label onto the path; leave pops it.
func (d *cueDecoder) enter(name string) { d.path = append(d.path, name) }

func (d *cueDecoder) leave() { d.path = d.path[:len(d.path)-1] }

// report records a schema finding about the value at the current path (with
// extra labels appended), unless CUE reported one there, above or below:
// CUE says it better, and one mistake gets one finding. CUE does drop some
// findings (a struct with a wrong value gets no "field not allowed" nor
// "required" for its other fields), which the decoder then supplies.
func (d *cueDecoder) report(r diag.Range, extra []string, format string, args ...any) {
	path := append(slices.Clip(d.path), extra...)
	if d.l.cueCovers(path) {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if shown := displayPath(path); shown != "" {
		msg = shown + ": " + msg
	}
	d.l.schemaErr(r, "%s", msg)
}

// labelRange is the range of the label of field f (the current path).
func (d *cueDecoder) labelRange(f *ast.Field) diag.Range {
	if d.exported {
		return d.l.pathLabelRange(d.path)
	}
	return d.l.nodeRange(f.Label)
}

// fieldRange is the range from the label of f to the end of its value.
func (d *cueDecoder) fieldRange(f *ast.Field) diag.Range {
	if d.exported {
		return d.l.pathFieldRange(d.path)
	}
	if r, ok := d.l.span(f.Label.Pos(), f.Value.End()); ok {
		return r
	}
	return d.l.fileStart()
}

// valueRange is the range of the value of f.
func (d *cueDecoder) valueRange(f *ast.Field) diag.Range {
	if d.exported {
		return d.l.pathValueRange(d.path)
	}
	return d.l.nodeRange(f.Value)
}

// elemRange is the range of element i of the list that is f's value.
func (d *cueDecoder) elemRange(el ast.Expr, i int) diag.Range {
	if d.exported {
		return d.l.pathElemRange(d.path, i)
	}
	return d.l.nodeRange(el)
}

// mismatch reports a value the decoder cannot read (see report).
func (d *cueDecoder) mismatch(f *ast.Field, want string) {
	d.report(d.valueRange(f), nil, "expected %s", want)
}

// structFields returns the fields of a struct value (an iterator, so a
// decoder walking 10,000 tasks allocates nothing for it), and false when e is
// not a struct. n is an upper bound of their number.
func structFields(e ast.Expr) (fields func(yield func(*ast.Field) bool), n int, ok bool) {
	st, ok := e.(*ast.StructLit)
	if !ok {
		return func(func(*ast.Field) bool) {}, 0, false
	}
	return func(yield func(*ast.Field) bool) {
		for _, el := range st.Elts {
			if f, ok := el.(*ast.Field); ok && !yield(f) {
				return
			}
		}
	}, len(st.Elts), true
}

// each reads every field of a struct value of the given kind into target
// (see Field.set), once per label: a field written twice with the same value
// (which CUE accepts) is read once, from its first declaration, as the attrs
// record. A nested element goes to nested, when not nil.
func (d *cueDecoder) each(f *ast.Field, kind string, target any, attrs *spec.Attrs, nested func(name string, g *ast.Field)) {
	fs, n, ok := structFields(f.Value)
	if !ok {
		d.mismatch(f, "a struct")
		return
	}
	if attrs.Ranges == nil {
		attrs.Ranges = make(map[string]diag.Range, n)
	}
	for g := range fs {
		name := fieldLabel(g.Label)
		if name == "" || attrs.Has(name) {
			continue
		}
		d.enter(name)
		attrs.Set(name, d.fieldRange(g))
		before := len(d.l.ds)
		fd, known := spec.LookupField(kind, name)
		switch {
		case !known:
			d.unknown(g, name, kind)
		case fd.Nested != "":
			if nested != nil {
				nested(name, g)
			}
		case d.l.cueCovers(d.path):
			// CUE reported the field itself (or an element above it) as
			// wrong, say two conflicting values: that is the finding, and
			// the value is not read, as when reading the evaluated file.
		default:
			d.field(fd, g, target, attrs)
		}
		if d.l.ds[before:].HasErrors() || ((!known || fd.Nested == "") && d.l.cueCovers(d.path)) {
			// Refused by the decoder or by CUE (at the field or inside its
			// value); a nested element is judged field by field instead.
			attrs.Refuse(name)
		}
		d.leave()
	}
	for _, rf := range d.fields[kind] {
		if rf.Required && !attrs.Has(rf.Name) {
			d.report(d.labelRange(f), []string{rf.Name}, "field is required but not present")
		}
	}
}

// field reads the value of the plain field fd, written as g, into target.
func (d *cueDecoder) field(fd *spec.Field, g *ast.Field, target any, attrs *spec.Attrs) {
	v := &d.val
	*v = spec.Value{}
	if d.read(fd, g, attrs, v) {
		fd.Set(target, v)
	}
}

// read reads the value of g, written for field fd, into v as fd.Value says.
// It reports whether v holds a value to set. Bounds and allowed values are
// left to CUE (schema/pipeline.cue states them).
func (d *cueDecoder) read(fd *spec.Field, g *ast.Field, attrs *spec.Attrs, v *spec.Value) bool {
	name := fd.Name
	ok := true
	switch fd.Value {
	case spec.ValString, spec.ValColumn, spec.ValEnum:
		v.Str, ok = d.str(g, name)
	case spec.ValBool:
		v.Bool, ok = d.boolean(g, name)
	case spec.ValInt:
		v.Int, ok = d.integer(g, name)
	case spec.ValFloat:
		v.Float, ok = d.number(g, name)
	case spec.ValDuration:
		v.Dur = d.duration(g, name)
	case spec.ValTime:
		v.Time = d.timestamp(g, name)
	case spec.ValRef:
		v.Ref = d.ref(g, name, fd.RefKind)
		ok = v.Ref != nil
	case spec.ValRefs:
		v.Refs = d.refList(g, name, fd.RefKind)
	case spec.ValStrings, spec.ValCommand:
		v.Strs, _ = d.strList(g, name)
	case spec.ValInts:
		v.Ints = d.intList(g, name)
	case spec.ValInputs:
		v.Inputs = d.inputs(g, name)
	case spec.ValEnv:
		v.Env = d.env(g, attrs)
	}
	return ok
}

// named calls fn for each named element under a labelled field (the `extract`
// in `task: extract: {...}`), after checking the name.
func (d *cueDecoder) named(f *ast.Field, kind string, fn func(n spec.Named, g *ast.Field)) {
	fs, _, ok := structFields(f.Value)
	if !ok {
		d.mismatch(f, "a struct of named "+kind+"s")
		return
	}
	for g := range fs {
		name := fieldLabel(g.Label)
		if name == "" {
			continue
		}
		d.enter(name)
		r := d.labelRange(g)
		if !spec.ValidName(name) {
			d.l.schemaErr(r, "%s", spec.NameError(kindNoun(kind), name))
		}
		if _, ok := g.Value.(*ast.StructLit); ok {
			fn(spec.Named{Name: name, NameRange: r, Range: r}, g)
		} else {
			d.mismatch(g, "a struct")
		}
		d.leave()
	}
}

// pipelines reads the pipeline fields of a file: exactly one pipeline.
func (d *cueDecoder) pipelines(fields []*ast.Field) *spec.Pipeline {
	type entry struct {
		name string
		f    *ast.Field
		r    diag.Range
	}
	var all []entry
	for _, f := range fields {
		d.enter(spec.KindPipeline)
		fs, _, ok := structFields(f.Value)
		if !ok {
			d.mismatch(f, "a struct: pipeline: NAME: {...}")
		}
		for g := range fs {
			name := fieldLabel(g.Label)
			if name == "" {
				continue
			}
			d.enter(name)
			all = append(all, entry{name, g, d.labelRange(g)})
			d.leave()
		}
		d.leave()
	}
	if d.exported {
		slices.SortStableFunc(all, func(a, b entry) int { return cmp.Compare(a.r.Start.Byte, b.r.Start.Byte) })
	}
	if len(all) == 0 {
		r := d.l.fileStart()
		if len(fields) > 0 {
			if d.exported {
				r = d.l.pathLabelRange([]string{spec.KindPipeline})
			} else {
				r = d.l.nodeRange(fields[0].Label)
			}
		}
		d.l.schemaErr(r, "no pipeline defined: a spec file defines exactly one, as pipeline: NAME: {...}")
		return nil
	}
	for _, e := range all[1:] {
		d.l.ds = append(d.l.ds, diag.Diagnostic{
			Rule: spec.RuleSchema, Severity: diag.Error, Range: e.r,
			Message: fmt.Sprintf("a spec file defines exactly one pipeline: %q is a second one", e.name),
			Detail:  fmt.Sprintf("the first, %q, is defined at %s", all[0].name, all[0].r),
		})
	}
	first := all[0]
	d.enter(spec.KindPipeline)
	d.enter(first.name)
	defer d.leave()
	defer d.leave()
	return d.pipeline(first.name, first.r, first.f)
}

func (d *cueDecoder) pipeline(name string, r diag.Range, f *ast.Field) *spec.Pipeline {
	p := &spec.Pipeline{Name: name, NameRange: r, Range: r}
	if !spec.ValidName(name) {
		d.l.schemaErr(r, "%s", spec.NameError(spec.KindPipeline, name))
	}
	fs, _, ok := structFields(f.Value)
	if !ok {
		d.mismatch(f, "a struct")
		return p
	}
	for g := range fs {
		key := fieldLabel(g.Label)
		d.enter(key)
		// Size each element list once: a Task is large, and growing a slice of
		// 10,000 of them by doubling copies each several times.
		_, n, _ := structFields(g.Value)
		fd, known := spec.LookupField(spec.KindPipeline, key)
		switch {
		case !known:
			d.unknown(g, key, spec.KindPipeline)
		case fd.Nested == "":
			if !p.Has(key) {
				p.Set(key, d.fieldRange(g))
				before := len(d.l.ds)
				d.field(fd, g, p, &p.Attrs)
				if d.l.ds[before:].HasErrors() || d.l.cueCovers(d.path) {
					p.Refuse(key)
				}
			}
		default:
			// A nested element, or named elements.
			switch key {
			case spec.KindSchedule:
				if !p.Has(key) {
					p.Set(key, d.fieldRange(g))
					p.Schedule = d.schedule(g)
				}
			case spec.KindRetryBudget:
				if !p.Has(key) {
					p.Set(key, d.fieldRange(g))
					p.RetryBudget = d.retryBudget(g)
				}
			case spec.KindPool:
				p.Pools = slices.Grow(p.Pools, n)
				d.named(g, spec.KindPool, func(n spec.Named, h *ast.Field) { p.Pools = append(p.Pools, d.pool(n, h)) })
			case spec.KindError:
				p.Errors = slices.Grow(p.Errors, n)
				d.named(g, spec.KindError, func(n spec.Named, h *ast.Field) { p.Errors = append(p.Errors, d.errorClass(n, h)) })
			case spec.KindRetry:
				p.Retries = slices.Grow(p.Retries, n)
				d.named(g, spec.KindRetry, func(n spec.Named, h *ast.Field) { p.Retries = append(p.Retries, d.retry(n, h)) })
			case spec.KindTask:
				p.Tasks = slices.Grow(p.Tasks, n)
				d.named(g, spec.KindTask, func(n spec.Named, h *ast.Field) { p.Tasks = append(p.Tasks, d.task(n, h)) })
			case spec.KindCheck:
				p.Checks = slices.Grow(p.Checks, n)
				d.named(g, spec.KindCheck, func(n spec.Named, h *ast.Field) { p.Checks = append(p.Checks, d.check(n, h)) })
			case spec.KindSink:
				p.Sinks = slices.Grow(p.Sinks, n)
				d.named(g, spec.KindSink, func(n spec.Named, h *ast.Field) { p.Sinks = append(p.Sinks, d.sink(n, h)) })
			case spec.KindPublish:
				p.Publishes = slices.Grow(p.Publishes, n)
				d.named(g, spec.KindPublish, func(n spec.Named, h *ast.Field) { p.Publishes = append(p.Publishes, d.publish(n, h)) })
			}
		}
		d.leave()
	}
	if d.exported {
		sortByName(p.Pools, func(x *spec.Pool) *spec.Named { return &x.Named })
		sortByName(p.Errors, func(x *spec.ErrorClass) *spec.Named { return &x.Named })
		sortByName(p.Retries, func(x *spec.RetryPolicy) *spec.Named { return &x.Named })
		sortByName(p.Tasks, func(x *spec.Task) *spec.Named { return &x.Named })
		sortByName(p.Checks, func(x *spec.Check) *spec.Named { return &x.Named })
		sortByName(p.Sinks, func(x *spec.Sink) *spec.Named { return &x.Named })
		sortByName(p.Publishes, func(x *spec.Publish) *spec.Named { return &x.Named })
	}
	return p
}

// sortByName puts elements read back from an evaluated file in the order
// their names appear in the source, as a plain file gives them.
func sortByName[T any](s []T, named func(*T) *spec.Named) {
	slices.SortStableFunc(s, func(a, b T) int {
		return cmp.Compare(named(&a).NameRange.Start.Byte, named(&b).NameRange.Start.Byte)
	})
}

// unknown reports a field the decoder does not know, unless CUE already
// reported the file (it reports unknown fields itself).
func (d *cueDecoder) unknown(f *ast.Field, name, kind string) {
	if name == "" {
		return
	}
	d.report(d.labelRange(f), nil, "field not allowed%s", fieldHint(d.path))
}

func (d *cueDecoder) schedule(f *ast.Field) *spec.Schedule {
	s := &spec.Schedule{Range: d.labelRange(f)}
	d.each(f, spec.KindSchedule, s, &s.Attrs, nil)
	return s
}

func (d *cueDecoder) retryBudget(f *ast.Field) *spec.RetryBudget {
	b := &spec.RetryBudget{Range: d.labelRange(f)}
	d.each(f, spec.KindRetryBudget, b, &b.Attrs, nil)
	return b
}

func (d *cueDecoder) pool(n spec.Named, f *ast.Field) spec.Pool {
	p := spec.Pool{Named: n}
	d.each(f, spec.KindPool, &p, &p.Attrs, nil)
	return p
}

func (d *cueDecoder) errorClass(n spec.Named, f *ast.Field) spec.ErrorClass {
	e := spec.ErrorClass{Named: n}
	d.each(f, spec.KindError, &e, &e.Attrs, nil)
	return e
}

func (d *cueDecoder) retry(n spec.Named, f *ast.Field) spec.RetryPolicy {
	r := spec.RetryPolicy{Named: n}
	d.each(f, spec.KindRetry, &r, &r.Attrs, nil)
	return r
}

func (d *cueDecoder) task(n spec.Named, f *ast.Field) spec.Task {
	t := spec.Task{Named: n}
	d.each(f, spec.KindTask, &t, &t.Attrs, func(name string, g *ast.Field) {
		switch name {
		case spec.KindHeartbeat:
			t.Heartbeat = d.heartbeat(g)
		case spec.KindFailover:
			t.Failover = d.failover(g)
		}
	})
	return t
}

func (d *cueDecoder) heartbeat(f *ast.Field) *spec.Heartbeat {
	h := &spec.Heartbeat{Range: d.labelRange(f)}
	d.each(f, spec.KindHeartbeat, h, &h.Attrs, nil)
	return h
}

func (d *cueDecoder) failover(f *ast.Field) *spec.Failover {
	o := &spec.Failover{Range: d.labelRange(f)}
	d.each(f, spec.KindFailover, o, &o.Attrs, nil)
	return o
}

func (d *cueDecoder) check(n spec.Named, f *ast.Field) spec.Check {
	c := spec.Check{Named: n}
	d.each(f, spec.KindCheck, &c, &c.Attrs, nil)
	return c
}

func (d *cueDecoder) sink(n spec.Named, f *ast.Field) spec.Sink {
	s := spec.Sink{Named: n}
	d.each(f, spec.KindSink, &s, &s.Attrs, nil)
	return s
}

func (d *cueDecoder) publish(n spec.Named, f *ast.Field) spec.Publish {
	p := spec.Publish{Named: n}
	d.each(f, spec.KindPublish, &p, &p.Attrs, nil)
	return p
}

// env reads the env struct; each entry's range is recorded as "env.KEY".
func (d *cueDecoder) env(f *ast.Field, attrs *spec.Attrs) map[string]string {
	fs, _, ok := structFields(f.Value)
	if !ok {
		d.mismatch(f, "a struct of strings")
		return nil
	}
	var env map[string]string
	for g := range fs {
		key := fieldLabel(g.Label)
		if key == "" || attrs.Has("env."+key) {
			continue
		}
		d.enter(key)
		if !d.validRef(d.labelRange(g), spec.EnvVarKind, key) {
			d.leave()
			continue
		}
		attrs.Set("env."+key, d.fieldRange(g))
		if v, ok := d.str(g, "env."+key); ok {
			if env == nil {
				env = map[string]string{}
			}
			env[key] = v
		}
		d.leave()
	}
	return env
}

// Scalars. Each returns ok false (and reports, see mismatch) when the value
// is not of the expected kind.

func (d *cueDecoder) str(f *ast.Field, name string) (string, bool) {
	if s, ok := litString(f.Value); ok {
		return s, true
	}
	d.mismatch(f, "a string")
	return "", false
}

func litString(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING || !isDoubleQuoted(lit.Value) {
		return "", false
	}
	s, err := literal.Unquote(lit.Value)
	return s, err == nil
}

func (d *cueDecoder) boolean(f *ast.Field, name string) (bool, bool) {
	if lit, ok := f.Value.(*ast.BasicLit); ok {
		switch lit.Kind {
		case token.TRUE:
			return true, true
		case token.FALSE:
			return false, true
		}
	}
	d.mismatch(f, "true or false")
	return false, false
}

// litNumber parses a numeric literal, with an optional sign.
func litNumber(e ast.Expr) (s string, isInt, ok bool) {
	neg := false
	if u, isUnary := e.(*ast.UnaryExpr); isUnary {
		neg = u.Op == token.SUB
		if u.Op != token.SUB && u.Op != token.ADD {
			return "", false, false
		}
		e = u.X
	}
	lit, isLit := e.(*ast.BasicLit)
	if !isLit || (lit.Kind != token.INT && lit.Kind != token.FLOAT) {
		return "", false, false
	}
	var ni literal.NumInfo
	if err := literal.ParseNum(lit.Value, &ni); err != nil {
		return "", false, false
	}
	s = ni.String()
	if neg {
		if len(s) > 0 && s[0] == '-' {
			s = s[1:]
		} else {
			s = "-" + s
		}
	}
	return s, ni.IsInt(), true
}

func (d *cueDecoder) integer(f *ast.Field, name string) (int, bool) {
	return d.intExpr(f, f.Value, nil, d.valueRange(f))
}

// intExpr reads the integer e, found in f at the extra path labels (an index
// in a list) and placed at r.
func (d *cueDecoder) intExpr(f *ast.Field, e ast.Expr, extra []string, r diag.Range) (int, bool) {
	s, isInt, ok := litNumber(e)
	if !ok || !isInt {
		d.report(r, extra, "expected an integer")
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 0)
	if err != nil {
		// CUE integers are unbounded; the model's are not.
		d.report(r, extra, "%s is out of range", s)
		return 0, false
	}
	return int(n), true
}

func (d *cueDecoder) number(f *ast.Field, name string) (float64, bool) {
	s, _, ok := litNumber(f.Value)
	if ok {
		if v, err := strconv.ParseFloat(s, 64); err == nil {
			return v, true
		}
		d.report(d.valueRange(f), nil, "%s is out of range", s)
		return 0, false
	}
	d.mismatch(f, "a number")
	return 0, false
}

func (d *cueDecoder) duration(f *ast.Field, name string) spec.Duration {
	s, ok := d.str(f, name)
	if !ok {
		return 0
	}
	v, err := spec.ParseField(name, s)
	if err != nil {
		d.report(d.valueRange(f), nil, "%s", err.Error())
		return 0
	}
	return v
}

func (d *cueDecoder) timestamp(f *ast.Field, name string) (t time.Time) {
	s, ok := d.str(f, name)
	if !ok {
		return t
	}
	v, err := spec.ParseTime(s)
	if err != nil {
		d.report(d.valueRange(f), nil, "%s", err.Error())
		return t
	}
	return v
}

// ref reads a name; kind is the element kind the name must be valid for (an
// artifact name, say). An invalid name is reported and left out of the model,
// as the HCL loader does.
func (d *cueDecoder) ref(f *ast.Field, name, kind string) *spec.Ref {
	s, ok := d.str(f, name)
	if !ok {
		return nil
	}
	r := d.valueRange(f)
	if !d.validRef(r, kind, s) {
		return nil
	}
	return &spec.Ref{Name: s, Range: r}
}

// validRef checks a name written as a reference, reporting it when invalid.
func (d *cueDecoder) validRef(r diag.Range, kind, s string) bool {
	if kind == spec.EnvVarKind {
		if !spec.ValidEnvName(s) {
			d.l.schemaErr(r, "invalid environment variable name %q: use letters, digits and '_', not starting with a digit", s)
			return false
		}
		return true
	}
	if kind == spec.LabelKind {
		if !spec.ValidLabel(s) {
			d.l.schemaErr(r, "%s", spec.LabelError(s))
			return false
		}
		return true
	}
	if !spec.ValidName(s) {
		d.l.schemaErr(r, "%s", spec.NameError(kindNoun(kind), s))
		return false
	}
	return true
}

// kindNoun names an element kind in messages ("invalid error class name").
func kindNoun(kind string) string {
	switch kind {
	case spec.KindError:
		return "error class"
	case spec.KindRetry:
		return "retry policy"
	}
	return kind
}

// list returns the elements of a list value.
func (d *cueDecoder) list(f *ast.Field, name, want string) ([]ast.Expr, bool) {
	l, ok := f.Value.(*ast.ListLit)
	if !ok {
		d.mismatch(f, want)
		return nil, false
	}
	return l.Elts, true
}

func (d *cueDecoder) strList(f *ast.Field, name string) ([]string, bool) {
	els, ok := d.list(f, name, "a list of strings")
	if !ok {
		return nil, false
	}
	var out []string
	for i, el := range els {
		s, ok := litString(el)
		if !ok {
			d.elemMismatch(el, i, "a string")
			continue
		}
		out = append(out, s)
	}
	return out, true
}

func (d *cueDecoder) elemMismatch(el ast.Expr, i int, want string) {
	d.report(d.elemRange(el, i), []string{strconv.Itoa(i)}, "expected %s", want)
}

func (d *cueDecoder) intList(f *ast.Field, name string) []int {
	els, ok := d.list(f, name, "a list of integers")
	if !ok {
		return nil
	}
	var out []int
	for i, el := range els {
		if _, isInt, ok := litNumber(el); !ok || !isInt {
			d.elemMismatch(el, i, "an integer")
			continue
		}
		if v, ok := d.intExpr(f, el, []string{strconv.Itoa(i)}, d.elemRange(el, i)); ok {
			out = append(out, v)
		}
	}
	return out
}

func (d *cueDecoder) refList(f *ast.Field, name, kind string) []spec.Ref {
	els, ok := d.list(f, name, "a list of strings")
	if !ok {
		return nil
	}
	var out []spec.Ref
	for i, el := range els {
		s, ok := litString(el)
		if !ok {
			d.elemMismatch(el, i, "a string")
			continue
		}
		r := d.elemRange(el, i)
		if !d.validRef(r, kind, s) {
			continue
		}
		out = append(out, spec.Ref{Name: s, Range: r})
	}
	return out
}

func (d *cueDecoder) inputs(f *ast.Field, name string) []spec.Input {
	els, ok := d.list(f, name, "a list of strings")
	if !ok {
		return nil
	}
	var out []spec.Input
	for i, el := range els {
		s, ok := litString(el)
		if !ok {
			d.elemMismatch(el, i, "a string")
			continue
		}
		r := d.elemRange(el, i)
		art, off, err := spec.ParseInput(s)
		if err != nil {
			d.l.schemaErr(r, "%s", err.Error())
			continue
		}
		out = append(out, spec.Input{Artifact: art, Offset: off, Range: r})
	}
	return out
}

// fieldTable is spec.Fields, built once for the decoder, which only reads it.
var fieldTable = spec.Fields()
