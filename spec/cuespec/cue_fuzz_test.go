package cuespec

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
)

// FuzzLoadCUE feeds arbitrary bytes to the CUE loader, seeded with every spec
// under testdata/cue: it must never panic, and every finding must be placed
// in the file (a file name, a line and a column of at least 1).
//
//	go test ./spec -run '^$' -fuzz FuzzLoadCUE -fuzztime 2m
func FuzzLoadCUE(f *testing.F) {
	seeds := map[string][]byte{}
	addTestdataSpecs(f, seeds)
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		f.Add(seeds[name])
	}
	f.Add([]byte(""))
	f.Add([]byte("pipeline: x: task: \"\\u00e9t\\u00e9\": {command: [\"é\"], timeout: \"1µs\"}"))
	f.Add([]byte("pipeline: x: {task: a: {command: [\"x\"], inputs: [\"a@+1\", \"b@-9999999999999999999\"]}, pool: p: slots: 99999999999999999999}"))
	f.Fuzz(func(t *testing.T, src []byte) {
		p, ds := LoadCUE("fuzz.cue", src)
		for _, d := range ds {
			if d.Range.Filename != "fuzz.cue" || d.Range.Start.Line < 1 || d.Range.Start.Column < 1 {
				t.Fatalf("finding not placed in the file: %#v", d)
			}
			if d.Rule != spec.RuleSyntax && d.Rule != spec.RuleSchema {
				t.Fatalf("unexpected rule: %v", d)
			}
		}
		if p == nil && !ds.HasErrors() {
			t.Fatalf("no pipeline and no error")
		}
	})
}

// FuzzLoadCUEPlainEvaluated checks, for every input, that reading a plain
// file from its syntax tree (the fast path) gives the model and the finding
// places that reading it from its evaluated value gives. Rules may differ:
// where the author's own values conflict and one of them breaks the schema
// too, CUE finds one conflict or the other first.
//
//	go test ./spec -run '^$' -fuzz FuzzLoadCUEPlainEvaluated -fuzztime 2m
func FuzzLoadCUEPlainEvaluated(f *testing.F) {
	seeds := map[string][]byte{}
	addTestdataSpecs(f, seeds)
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		f.Add(seeds[name])
	}
	// Inputs on which the two ways once disagreed.
	f.Add([]byte("A00:{A:{A:\"000000000\",A:\"0\",A:0},A0:{A:0,B:0}}"))
	f.Add([]byte("e:{},e:[]"))
	f.Add([]byte("e:{},e:{}"))
	f.Add([]byte("\"0\":{}"))
	f.Add([]byte("pipeline:A:{A:{A:\"\"}},pipeline:[]"))
	places := func(ds diag.Diagnostics) string {
		var b strings.Builder
		for _, d := range ds.Sort() {
			fmt.Fprintf(&b, "%s\n", d.Range)
		}
		return b.String()
	}
	opts := []cmp.Option{
		cmpopts.IgnoreTypes(diag.Range{}),
		cmp.Transformer("attrNames", func(a spec.Attrs) []string { return slices.Sorted(maps.Keys(a.Ranges)) }),
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		plain := &cueLoader{file: "fuzz.cue", src: src}
		pp := plain.load()
		if plain.parsed == nil || !isPlainFile(plain.parsed) {
			return
		}
		evaluated := &cueLoader{file: "fuzz.cue", src: src, evaluateAll: true}
		ep := evaluated.load()
		if a, b := places(plain.ds), places(evaluated.ds); a != b {
			t.Fatalf("findings read plain:\n%s\nevaluated:\n%s", cueDiagLines(plain.ds), cueDiagLines(evaluated.ds))
		}
		if !plain.ds.HasErrors() {
			if d := cmp.Diff(pp, ep, opts...); d != "" {
				t.Fatalf("models differ (-plain +evaluated):\n%s", d)
			}
		}
	})
}
