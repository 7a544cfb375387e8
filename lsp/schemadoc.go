package lsp

import (
	"regexp"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/parser"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/schema"
	"github.com/pipec/pipec/spec"
)

// definitions maps an element kind to its definition in pipeline.cue.
var definitions = spec.SchemaDefinitions()

// schemaDocs is what pipeline.cue says about each element and field: the
// text a hover on a field shows, so the editor and `cue vet` read one source.
type schemaDocs struct {
	kinds  map[string]string            // element kind -> its definition's doc
	fields map[string]map[string]string // kind -> field -> doc and type
	nested map[string]map[string]string // kind -> field -> the element kind it holds
}

// fieldTable is a line of a definition's field table ("\tcommand  the program").
var fieldTable = regexp.MustCompile(`^\s+([a-z_]+)\s{2,}(\S.*)$`)

// loadSchemaDocs reads the comments and types of pipeline.cue. The schema is
// compiled into pipec, so a parse failure is a bug a test catches; it yields
// empty docs rather than a crash.
func loadSchemaDocs() *schemaDocs {
	sd := &schemaDocs{kinds: map[string]string{}, fields: map[string]map[string]string{}, nested: map[string]map[string]string{}}
	for kind, fs := range spec.Fields() {
		sd.nested[kind] = map[string]string{}
		for _, f := range fs {
			if f.Nested != "" {
				sd.nested[kind][f.Name] = f.Nested
			}
		}
	}
	f, err := parser.ParseFile(schema.PipelineFilename, schema.PipelineCUE, parser.ParseComments)
	if err != nil {
		return sd
	}
	byDef := map[string]string{}
	for k, d := range definitions {
		byDef[d] = k
	}
	for _, decl := range f.Decls {
		def, ok := decl.(*ast.Field)
		if !ok {
			continue
		}
		name, _, _ := ast.LabelName(def.Label)
		kind, ok := byDef[name]
		if !ok {
			continue
		}
		doc := docOf(def)
		sd.kinds[kind] = doc
		fields := map[string]string{}
		for _, line := range strings.Split(doc, "\n") {
			if m := fieldTable.FindStringSubmatch(line); m != nil {
				fields[m[1]] = m[2]
			}
		}
		if st, ok := def.Value.(*ast.StructLit); ok {
			for _, e := range st.Elts {
				fld, ok := e.(*ast.Field)
				if !ok {
					continue
				}
				fname, _, err := ast.LabelName(fld.Label)
				if err != nil {
					continue // a pattern constraint: its fields are in the table
				}
				typ, _ := format.Node(fld.Value)
				text := docOf(fld)
				if text == "" {
					text = fields[fname]
				}
				entry := "`" + fname + ": " + string(typ) + "`"
				if fld.Constraint.String() == "!" {
					entry += " (required)"
				}
				if text != "" {
					entry += "\n\n" + text
				}
				fields[fname] = entry
			}
		}
		sd.fields[kind] = fields
	}
	return sd
}

func docOf(n ast.Node) string {
	var parts []string
	for _, cg := range ast.Comments(n) {
		if cg.Doc {
			parts = append(parts, strings.TrimSpace(cg.Text()))
		}
	}
	return strings.Join(parts, "\n")
}

// describe is the hover text of a field of an element kind: its type and
// doc, and for a nested element (a task under pipeline, heartbeat under
// task) what that element is. The defaults the compiler applies to a retry
// policy are named, since the schema cannot say them.
func (sd *schemaDocs) describe(kind, name string) string {
	var parts []string
	if nk := sd.nested[kind][name]; nk != "" && sd.kinds[nk] != "" {
		parts = append(parts, sd.kinds[nk])
	} else if doc := sd.fields[kind][name]; doc != "" {
		parts = append(parts, doc)
	}
	if kind == spec.KindRetry {
		if d, ok := retryDefaults()[name]; ok {
			parts = append(parts, "Default when not written: "+d+".")
		}
	}
	return strings.Join(parts, "\n\n")
}

// retryDefaults are the compiler's defaults for a retry policy's fields.
func retryDefaults() map[string]string {
	return map[string]string{
		"max_attempts": strconv.Itoa(compiler.DefaultMaxAttempts),
		"initial":      compiler.DefaultInitial.String(),
		"multiplier":   strconv.FormatFloat(compiler.DefaultMultiplier, 'g', -1, 64),
		"max_delay":    compiler.DefaultMaxDelay.String(),
		"jitter":       string(compiler.DefaultJitter),
		"max_elapsed":  "unbounded",
		"on":           "every failure",
	}
}
