package compiler_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/tracked"
	"github.com/pipec/pipec/spec"
	"github.com/pipec/pipec/spec/specload"
)

// fuzzLoadAndCompile feeds arbitrary bytes through a loader and the compiler:
// nothing may panic, every finding must have a position, and a plan from a
// spec without errors must be valid JSON whose digest matches.
func fuzzLoadAndCompile(f *testing.F, syn spec.Syntax, glob string) {
	seeds := tracked.Glob(f, "..", "examples/*/"+glob)
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		p, ds := specload.Load(syn, "fuzz."+string(syn), src)
		checkPositions(t, ds)
		if p == nil {
			return
		}
		res, cds := compiler.Compile(p)
		checkPositions(t, cds)
		if len(ds) > 0 || cds.HasErrors() {
			return
		}
		var v map[string]any
		if err := json.Unmarshal(res.Plan.Marshal(), &v); err != nil {
			t.Fatalf("plan is not JSON: %v", err)
		}
		if res.Plan.Digest != compiler.Digest(res.Plan) {
			t.Fatal("digest does not match the plan")
		}
	})
}

func checkPositions(t *testing.T, ds diag.Diagnostics) {
	t.Helper()
	for _, d := range ds {
		if d.Range.Filename == "" || d.Range.Start.Line < 1 || d.Range.Start.Column < 1 {
			t.Fatalf("finding without a position: %+v", d)
		}
	}
}

func FuzzCompileHCL(f *testing.F) { fuzzLoadAndCompile(f, spec.SyntaxHCL, "*.hcl") }
func FuzzCompileCUE(f *testing.F) { fuzzLoadAndCompile(f, spec.SyntaxCUE, "*.cue") }
