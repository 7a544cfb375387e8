package compiler_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/compiler"
)

// TestLoadPlanAcceptsCompiledPlans: every plan pipec compile writes loads back
// unchanged.
func TestLoadPlanAcceptsCompiledPlans(t *testing.T) {
	for _, ex := range examples {
		t.Run(ex, func(t *testing.T) {
			want := compileFile(t, filepath.Join("..", "examples", ex, "pipeline.hcl"))
			path := filepath.Join(t.TempDir(), "plan.json")
			if err := os.WriteFile(path, want.Marshal(), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := compiler.LoadPlan(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Marshal()) != string(want.Marshal()) {
				t.Error("the loaded plan differs from the compiled one")
			}
		})
	}
}

// craft edits a compiled plan as an adversary would, then recomputes its
// digest, so only validation can refuse it.
func craft(t *testing.T, edit func(p *compiler.Plan)) []byte {
	t.Helper()
	p := compileFile(t, filepath.Join("..", "examples", "orders", "pipeline.hcl"))
	edit(p)
	p.Digest = compiler.Digest(p)
	return p.Marshal()
}

func TestReadPlanRefusesCraftedPlans(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *compiler.Plan)
		want string
	}{
		{"task named ../../x", func(p *compiler.Plan) { p.Tasks[0].Name = "../../x" }, `invalid task name "../../x"`},
		{"order names a missing task", func(p *compiler.Plan) { p.Order = append(p.Order, "task.ghost") }, `order names "task.ghost", which is no task`},
		{"order misses a node", func(p *compiler.Plan) { p.Order = p.Order[1:] }, "order leaves out"},
		{"order repeats a node", func(p *compiler.Plan) { p.Order[1] = p.Order[0] }, "twice"},
		{"order out of dependency order", func(p *compiler.Plan) {
			p.Order[0], p.Order[len(p.Order)-1] = p.Order[len(p.Order)-1], p.Order[0]
		}, "order puts"},
		{"output named ../x", func(p *compiler.Plan) { p.Tasks[1].Outputs[0] = "../x" }, `invalid artifact name "../x"`},
		{"input of a missing artifact", func(p *compiler.Plan) { p.Tasks[0].Inputs[0].Artifact = "nothing" }, `reads artifact "nothing", which no task outputs`},
		{"depends on a missing task", func(p *compiler.Plan) { p.Tasks[0].DependsOn = []string{"ghost"} }, `depends on "ghost", which is not a task`},
		{"publish skips its checks", func(p *compiler.Plan) { p.Publishes[0].Checks = []string{} }, "derived fields"},
		{"needs edited", func(p *compiler.Plan) { p.Tasks[0].Needs = []string{} }, "derived fields"},
		{"task declared twice", func(p *compiler.Plan) { p.Tasks = append(p.Tasks, p.Tasks[0]) }, `task "clean" is declared twice`},
		{"environment name", func(p *compiler.Plan) { p.Tasks[0].Env = map[string]string{"A=B": "x"} }, `invalid environment variable name "A=B"`},
		{"secret_env name", func(p *compiler.Plan) { p.Tasks[0].SecretEnv = []string{"X;rm"} }, `invalid environment variable name "X;rm" in secret_env`},
		{"empty command", func(p *compiler.Plan) { p.Tasks[0].Command = []string{} }, "the command is empty"},
		{"bad timeout", func(p *compiler.Plan) { p.Tasks[1].Timeout = "soon" }, `invalid duration "soon"`},
		{"zero slots", func(p *compiler.Plan) { p.Pools[0].Slots = 0 }, "slots: 0 is out of range"},
		{"undefined pool", func(p *compiler.Plan) { p.Tasks[0].Pool = "nowhere" }, `uses pool "nowhere", which is not defined`},
		{"exit code", func(p *compiler.Plan) { p.Errors[0].ExitCodes = []int{256} }, "exit code 256 is out of range"},
		{"fencing", func(p *compiler.Plan) { p.Sinks[0].Fencing = "maybe" }, `fencing "maybe"`},
		{"sink named ..", func(p *compiler.Plan) { p.Sinks[0].Name = ".."; p.Publishes[0].Sink = ".." }, `invalid sink name ".."`},
		{"sink conflict", func(p *compiler.Plan) {
			s := p.Sinks[0]
			s.Name, s.Path = "zz", "./"+s.Path+"/"
			p.Sinks = append(p.Sinks, s)
		}, "[sink-conflict]"},
		{"pipeline name", func(p *compiler.Plan) { p.Pipeline = "a/b" }, `invalid pipeline name "a/b"`},
		{"policies disagree", func(p *compiler.Plan) { p.Tasks[0].Retry.MaxAttempts = 9 }, `retry policy "default" differs`},
		{"label with a comma", func(p *compiler.Plan) { p.Tasks[0].Labels = []string{"a,b"} }, `invalid label "a,b"`},
		{"labels unsorted", func(p *compiler.Plan) { p.Tasks[0].Labels = []string{"spark", "gpu"} }, "derived fields"},
		{"labels twice", func(p *compiler.Plan) { p.Tasks[0].Labels = []string{"gpu", "gpu"} }, "derived fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compiler.ReadPlan("plan.json", craft(t, tc.edit))
			var pe *compiler.PlanFileError
			if !errors.As(err, &pe) {
				t.Fatalf("accepted, or not a PlanFileError: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks %q", err, tc.want)
			}
		})
	}
}

func TestReadPlanRefusesMalformedFiles(t *testing.T) {
	good := craft(t, func(*compiler.Plan) {})
	if _, err := compiler.ReadPlan("plan.json", good); err != nil {
		t.Fatalf("an unedited plan is refused: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(good, &doc); err != nil {
		t.Fatal(err)
	}
	doc["extra"] = true
	withExtra, _ := json.Marshal(doc)
	tampered := strings.Replace(string(good), `"slots": 2`, `"slots": 3`, 1)
	for name, tc := range map[string]struct {
		src, want string
	}{
		"unknown field":  {string(withExtra), `unknown field "extra"`},
		"trailing data":  {string(good) + "{}", "data after"},
		"not JSON":       {"pipeline {", "not a plan"},
		"apiVersion":     {strings.Replace(string(good), `"pipec/v1"`, `"pipec/v9"`, 1), `apiVersion "pipec/v9"`},
		"digest":         {tampered, "digest does not match"},
		"empty":          {"", "not a plan"},
		"array":          {"[]", "not a plan"},
		"wrong type":     {strings.Replace(string(good), `"slots": 2`, `"slots": "2"`, 1), "not a plan"},
		"huge exit code": {strings.Replace(string(good), `75`, `1e999`, 1), "not a plan"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := compiler.ReadPlan("plan.json", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestPlanFileErrorListsAtMostTen(t *testing.T) {
	e := &compiler.PlanFileError{File: "p.json", Problems: make([]string, 25)}
	if got := e.Error(); !strings.HasSuffix(got, "and 15 more") || strings.Count(got, "\n") != 11 {
		t.Errorf("got %q", got)
	}
}

// FuzzReadPlan: a plan file is hostile input. Nothing panics, and a plan that
// is accepted loads again to the same bytes.
func FuzzReadPlan(f *testing.F) {
	for _, ex := range examples {
		if b, err := os.ReadFile(filepath.Join("testdata", ex+".plan.json")); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"apiVersion":"pipec/v1","pipeline":"p","digest":""}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := compiler.ReadPlan("fuzz.json", b)
		if err != nil {
			return
		}
		again, err := compiler.ReadPlan("fuzz.json", p.Marshal())
		if err != nil {
			t.Fatalf("an accepted plan is refused once re-marshalled: %v", err)
		}
		if string(again.Marshal()) != string(p.Marshal()) {
			t.Fatal("an accepted plan changed when loaded again")
		}
	})
}

// TestReadPlanRefusesEmptyLabels: pipec compile leaves labels out when a
// task has none, so "labels": [] (which the digest does not see, being
// left out of the digested form) is a hand-edited plan.
func TestReadPlanRefusesEmptyLabels(t *testing.T) {
	b := compileFile(t, filepath.Join("..", "examples", "orders", "pipeline.hcl")).Marshal()
	edited := strings.Replace(string(b), `"effects": [],`, `"effects": [], "labels": [],`, 1)
	if edited == string(b) {
		t.Fatal("the plan has no effects field to edit beside")
	}
	_, err := compiler.ReadPlan("plan.json", []byte(edited))
	if err == nil || !strings.Contains(err.Error(), "labels is empty") {
		t.Fatalf("ReadPlan = %v, want a refusal of the empty labels", err)
	}
}
