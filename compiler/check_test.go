package compiler_test

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/spec/specload"
)

// TestCheckAgreesWithCompile: Check, the compile of lint and the language
// server, reports exactly Compile's findings and graph, leaves the plan out,
// and PlanOf then builds the very plan Compile writes (digest included), on
// the examples and on every lint test spec (cycles, missing names, bad
// policies among them).
func TestCheckAgreesWithCompile(t *testing.T) {
	var paths []string
	for _, ex := range examples {
		paths = append(paths, filepath.Join("..", "examples", ex, "pipeline.hcl"))
	}
	for _, glob := range []string{"*.hcl", "*.cue"} {
		m, err := filepath.Glob(filepath.Join("..", "lint", "testdata", "src", glob))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, m...)
	}
	if len(paths) < 10 {
		t.Fatalf("only %d specs found", len(paths))
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			// Two loads: a compile may normalise its pipeline (a number that
			// is not finite), so each compiler gets its own.
			p1, _, _, err := specload.LoadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			p2, _, _, err := specload.LoadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if p1 == nil {
				t.Skip("does not load")
			}
			full, fullDs := compiler.Compile(p1)
			lazy, lazyDs := compiler.Check(p2)
			if diff := cmp.Diff(fullDs, lazyDs); diff != "" {
				t.Errorf("findings differ (-Compile +Check):\n%s", diff)
			}
			if diff := cmp.Diff(full.Graph, lazy.Graph); diff != "" {
				t.Errorf("graphs differ (-Compile +Check):\n%s", diff)
			}
			if lazy.Plan != nil {
				t.Error("Check built the plan")
			}
			if full.PlanOf() != full.Plan {
				t.Error("PlanOf of a compiled result is not its Plan")
			}
			plan := lazy.PlanOf()
			if diff := cmp.Diff(full.Plan, plan); diff != "" {
				t.Errorf("plans differ (-Compile +PlanOf):\n%s", diff)
			}
			if plan == nil || plan.Digest != full.Plan.Digest || plan.Digest == "" {
				t.Errorf("digest %v, want %q", plan, full.Plan.Digest)
			}
		})
	}
}

// TestPlanOfBuildsOnce: readers asking at the same time get one plan.
func TestPlanOfBuildsOnce(t *testing.T) {
	p, _, _, err := specload.LoadFile(filepath.Join("..", "examples", "orders", "pipeline.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	res, _ := compiler.Check(p)
	plans := make([]*compiler.Plan, 8)
	var wg sync.WaitGroup
	for i := range plans {
		wg.Go(func() { plans[i] = res.PlanOf() })
	}
	wg.Wait()
	for i, pl := range plans {
		if pl == nil || pl != plans[0] {
			t.Fatalf("reader %d got plan %p, reader 0 %p", i, pl, plans[0])
		}
	}
}
