package schema_test

import (
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"github.com/pipec/pipec/schema"
	"github.com/pipec/pipec/spec"
)

// definitions maps each element kind of spec.Fields to its definition in
// pipeline.cue.
var definitions = spec.SchemaDefinitions()

// schemaField is a field as pipeline.cue declares it.
type schemaField struct {
	name     string
	required bool
	value    cue.Value
}

func compile(t *testing.T) cue.Value {
	t.Helper()
	v := cuecontext.New().CompileString(schema.PipelineCUE, cue.Filename(schema.PipelineFilename))
	if err := v.Err(); err != nil {
		t.Fatalf("pipeline.cue does not compile: %v", err)
	}
	return v
}

// fieldsOf lists the fields a definition declares, optional and required
// ones included, and those it allows through pattern constraints naming them
// (`["env"]: ...` or `[=~"^(retry|pool)$"]: ...`, as #Task does for speed).
func fieldsOf(t *testing.T, v cue.Value) []schemaField {
	t.Helper()
	it, err := v.Fields(cue.Optional(true), cue.Patterns(true))
	if err != nil {
		t.Fatalf("%v: %v", v.Path(), err)
	}
	var out []schemaField
	for it.Next() {
		sel := it.Selector()
		if sel.ConstraintType() != cue.PatternConstraint {
			out = append(out, schemaField{
				name:     sel.Unquoted(),
				required: sel.ConstraintType() == cue.RequiredConstraint,
				value:    it.Value(),
			})
			continue
		}
		names, ok := patternNames(sel.Pattern())
		if !ok {
			t.Errorf("%v: pattern %v does not list field names", v.Path(), sel.Pattern())
			continue
		}
		for _, n := range names {
			out = append(out, schemaField{name: n, value: it.Value()})
		}
	}
	slices.SortFunc(out, func(a, b schemaField) int { return strings.Compare(a.name, b.name) })
	return out
}

// patternNames returns the field names a label pattern matches: one name,
// or an alternation anchored at both ends.
func patternNames(p cue.Value) ([]string, bool) {
	if s, err := p.String(); err == nil {
		return []string{s}, true
	}
	op, args := p.Expr()
	if op != cue.RegexMatchOp || len(args) != 1 {
		return nil, false
	}
	re, err := args[0].String()
	if err != nil || !strings.HasPrefix(re, "^(") || !strings.HasSuffix(re, ")$") {
		return nil, false
	}
	names := strings.Split(re[2:len(re)-2], "|")
	for _, n := range names {
		if !spec.ValidName(n) {
			return nil, false
		}
	}
	return names, true
}

// TestSchemaMatchesFields fails when pipeline.cue and spec.Fields (the table
// both loaders follow) disagree about a field: its name, whether it is
// required, or which element a nested field holds.
func TestSchemaMatchesFields(t *testing.T) {
	sch := compile(t)
	table := spec.Fields()
	for kind := range table {
		if _, ok := definitions[kind]; !ok {
			t.Errorf("spec.Fields has kind %q with no definition in pipeline.cue", kind)
		}
	}
	for kind, def := range definitions {
		dv := sch.LookupPath(cue.ParsePath(def))
		if !dv.Exists() {
			t.Errorf("pipeline.cue has no %s", def)
			continue
		}
		want := slices.Clone(table[kind])
		slices.SortFunc(want, func(a, b spec.Field) int { return strings.Compare(a.Name, b.Name) })
		got := fieldsOf(t, dv)
		names := func(n int, at func(int) string) []string {
			s := make([]string, n)
			for i := range s {
				s[i] = at(i)
			}
			return s
		}
		gotNames := names(len(got), func(i int) string { return got[i].name })
		wantNames := names(len(want), func(i int) string { return want[i].Name })
		if !slices.Equal(gotNames, wantNames) {
			t.Errorf("%s (%s): pipeline.cue declares %v, spec.Fields has %v", kind, def, gotNames, wantNames)
			continue
		}
		for i, f := range want {
			g := got[i]
			if g.required != f.Required {
				t.Errorf("%s.%s: required in pipeline.cue is %v, in spec.Fields %v", kind, f.Name, g.required, f.Required)
			}
			if f.Nested == "" {
				continue
			}
			// A nested field holds the nested definition; a labelled one holds
			// it under any name ([Name=string]: #X).
			nv := g.value
			if f.Labelled {
				nv = nv.LookupPath(cue.MakePath(cue.AnyString))
			}
			nestedDef := sch.LookupPath(cue.ParsePath(definitions[f.Nested]))
			if !nv.Exists() || !nestedDef.Exists() {
				t.Errorf("%s.%s: no nested %s in pipeline.cue", kind, f.Name, f.Nested)
				continue
			}
			if err := nestedDef.Subsume(nv); err != nil {
				t.Errorf("%s.%s: pipeline.cue does not hold a %s there: %v", kind, f.Name, definitions[f.Nested], err)
			}
			if err := nv.Subsume(nestedDef); err != nil {
				t.Errorf("%s.%s: pipeline.cue holds more than a %s there: %v", kind, f.Name, definitions[f.Nested], err)
			}
		}
	}
	// A file holds pipelines.
	file := fieldsOf(t, sch.LookupPath(cue.ParsePath("#File")))
	if len(file) != 1 || file[0].name != spec.KindPipeline {
		t.Errorf("#File declares %v, want only pipeline", file)
	}
}

// TestSchemaIsClosed checks that the definitions reject unknown fields and
// values outside an enumeration, which is what makes a misspelt field an
// error rather than a silent no-op.
func TestSchemaIsClosed(t *testing.T) {
	sch := compile(t)
	ctx := cuecontext.New() // values of two contexts combine
	for _, tc := range []struct{ def, value string }{
		{"#Task", `{command: ["x"], commnd: ["x"]}`},
		{"#Pipeline", `{tasks: {}}`},
		{"#RetryPolicy", `{jitter: "ful"}`},
		{"#Sink", `{type: "directory", path: "p", fencing: "tokens"}`},
		{"#Pool", `{slots: "2"}`},
		{"#Pool", `{slots: 0}`},
		{"#ErrorClass", `{exit_codes: [256]}`},
		{"#Task", `{outputs: ["x"]}`}, // command is required
	} {
		v := sch.LookupPath(cue.ParsePath(tc.def)).Unify(ctx.CompileString(tc.value))
		if err := v.Validate(cue.Concrete(true)); err == nil {
			t.Errorf("%s accepts %s", tc.def, tc.value)
		}
	}
	ok := sch.LookupPath(cue.ParsePath("#Task")).Unify(ctx.CompileString(`{command: ["x"], env: {A: "b"}, heartbeat: {every: "1s", lease: "5s"}}`))
	if err := ok.Validate(cue.Concrete(true)); err != nil {
		t.Errorf("#Task rejects a valid task: %v", err)
	}
}
