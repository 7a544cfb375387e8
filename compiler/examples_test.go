package compiler_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/internal/golden"
	"github.com/pipec/pipec/spec/specload"
)

// examples are the specs under examples/ that must compile cleanly, each in
// HCL and, where it exists, CUE.
var examples = []string{"orders", "backfill", "labels"}

func compileFile(t *testing.T, path string) *compiler.Plan {
	t.Helper()
	p, _, ds, err := specload.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) > 0 {
		t.Fatalf("%s: loader findings: %v", path, ds)
	}
	res, ds := compiler.Compile(p)
	if len(ds) > 0 {
		t.Fatalf("%s: compiler findings: %v", path, ds)
	}
	return res.Plan
}

// TestHCLAndCUEGiveIdenticalPlans is the equivalence promise of
// docs/design.md section 3: one pipeline, two syntaxes, the same bytes.
func TestHCLAndCUEGiveIdenticalPlans(t *testing.T) {
	for _, ex := range examples {
		cuePath := filepath.Join("..", "examples", ex, "pipeline.cue")
		if _, err := os.Stat(cuePath); err != nil {
			continue
		}
		t.Run(ex, func(t *testing.T) {
			fromHCL := compileFile(t, filepath.Join("..", "examples", ex, "pipeline.hcl"))
			fromCUE := compileFile(t, cuePath)
			if diff := cmp.Diff(fromHCL, fromCUE); diff != "" {
				t.Errorf("plans differ (-hcl +cue):\n%s", diff)
			}
			if !bytes.Equal(fromHCL.Marshal(), fromCUE.Marshal()) {
				t.Error("plan bytes differ")
			}
		})
	}
}

// TestPlansMatchSchemaAndGolden validates every example plan against
// schema/plan.schema.json and compares it with its golden file
// (PIPEC_UPDATE_GOLDEN=1 rewrites them).
func TestPlansMatchSchemaAndGolden(t *testing.T) {
	c := jsonschema.NewCompiler()
	sch, err := c.Compile(filepath.Join("..", "schema", "plan.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range examples {
		t.Run(ex, func(t *testing.T) {
			b := compileFile(t, filepath.Join("..", "examples", ex, "pipeline.hcl")).Marshal()
			var doc any
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(doc); err != nil {
				t.Errorf("plan does not match schema/plan.schema.json: %v", err)
			}
			golden.Check(t, filepath.Join("testdata", ex+".plan.json"), b)
		})
	}
}
