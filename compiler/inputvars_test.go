package compiler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pipec/pipec/spec"
	"github.com/pipec/pipec/spec/specload"
)

// inputVarFindings loads src (HCL or CUE), compiles it, and returns the
// input-variable-collision findings as "line:col message".
func inputVarFindings(t *testing.T, syn spec.Syntax, file, src string) []string {
	t.Helper()
	p, ds := specload.Load(syn, file, []byte(src))
	if ds.HasErrors() || p == nil {
		t.Fatalf("load: %v", ds)
	}
	_, cds := Compile(p)
	var out []string
	for _, d := range cds {
		if d.Rule != RuleInputVariable {
			t.Errorf("unexpected finding %s", d)
			continue
		}
		out = append(out, fmt.Sprintf("%d:%d %s", d.Range.Start.Line, d.Range.Start.Column, d.Message))
	}
	return out
}

const collisionMsg = `task "clean" reads %s and %s, which both would be PIPEC_INPUT_raw%s: the task would read one as the other; rename artifact "raw%[3]s" (inputs of other intervals are PIPEC_INPUT_<artifact>_PREV, _PREV<n> and _NEXT<n>)`

// An artifact named like an offset input's variable (raw_PREV beside
// raw@-1) is refused where a task reads both, in either order, for
// _PREV, _PREV<n> and _NEXT<n>, in HCL and CUE alike, at file:line:col.
func TestInputVariableCollision(t *testing.T) {
	hcl := func(inputs string, suffix string) string {
		return `pipeline "iv" {
  schedule {
    every = "24h"
  }
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw", "raw` + suffix + `"]
  }
  task "clean" {
    command = ["./clean.sh"]
    inputs  = [` + inputs + `]
  }
}
`
	}
	cue := func(inputs string, suffix string) string {
		return `pipeline: iv: {
	schedule: every: "24h"
	task: extract: {command: ["./extract.sh"], outputs: ["raw", "raw` + suffix + `"]}
	task: clean: {
		command: ["./clean.sh"]
		inputs: [` + inputs + `]
	}
}
`
	}
	for _, c := range []struct {
		offset, suffix string
	}{{"-1", "_PREV"}, {"-2", "_PREV2"}, {"+1", "_NEXT1"}} {
		off, plain := `"raw@`+c.offset+`"`, `"raw`+c.suffix+`"`
		label := "raw@" + c.offset
		for _, order := range []struct {
			inputs, first, second string
			hclCol, cueCol        int
		}{
			{off + ", " + plain, label, "raw" + c.suffix, 16 + len(off) + 2, 12 + len(off) + 2},
			{plain + ", " + off, "raw" + c.suffix, label, 16 + len(plain) + 2, 12 + len(plain) + 2},
		} {
			want := fmt.Sprintf(collisionMsg, order.first, order.second, c.suffix)
			got := inputVarFindings(t, spec.SyntaxHCL, "iv.hcl", hcl(order.inputs, c.suffix))
			if diff := cmp.Diff([]string{fmt.Sprintf("11:%d %s", order.hclCol, want)}, got); diff != "" {
				t.Errorf("HCL %s (-want +got):\n%s", order.inputs, diff)
			}
			got = inputVarFindings(t, spec.SyntaxCUE, "iv.cue", cue(order.inputs, c.suffix))
			if diff := cmp.Diff([]string{fmt.Sprintf("6:%d %s", order.cueCol, want)}, got); diff != "" {
				t.Errorf("CUE %s (-want +got):\n%s", order.inputs, diff)
			}
		}
	}
}

// No task reads both, but an artifact is named like an offset input's
// variable: refused at the output that declares it.
func TestInputVariableCollisionOutput(t *testing.T) {
	src := `pipeline "iv" {
  schedule {
    every = "24h"
  }
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw"]
  }
  task "totals" {
    command = ["./totals.sh"]
    inputs  = ["raw", "totals@-1"]
    outputs = ["totals"]
  }
  task "other" {
    command = ["./other.sh"]
    outputs = ["totals_PREV"]
  }
}
`
	got := inputVarFindings(t, spec.SyntaxHCL, "iv.hcl", src)
	want := []string{`16:16 artifact "totals_PREV" is named like the variable of input totals@-1 of task "totals" (PIPEC_INPUT_totals_PREV): a task reading both would read one as the other; rename the artifact`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The same spec in CUE.
	cue := `pipeline: iv: {
	schedule: every: "24h"
	task: extract: {command: ["./extract.sh"], outputs: ["raw"]}
	task: totals: {command: ["./totals.sh"], inputs: ["raw", "totals@-1"], outputs: ["totals"]}
	task: other: {command: ["./other.sh"], outputs: ["totals_PREV"]}
}
`
	got = inputVarFindings(t, spec.SyntaxCUE, "iv.cue", cue)
	if len(got) != 1 || !strings.HasPrefix(got[0], "5:51 ") {
		t.Errorf("CUE: got %q, want one finding at 5:51", got)
	}
}

// Inputs that do not collide: two offsets of one artifact (they share the
// documented plain alias), and names that only look alike.
func TestInputVariableNoCollision(t *testing.T) {
	src := `pipeline "iv" {
  schedule {
    every = "24h"
  }
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw", "raw_PREVIOUS", "raw_prev"]
  }
  task "clean" {
    command = ["./clean.sh"]
    inputs  = ["raw@-1", "raw@-2", "raw_PREVIOUS", "raw_prev"]
  }
}
`
	if got := inputVarFindings(t, spec.SyntaxHCL, "iv.hcl", src); len(got) != 0 {
		t.Errorf("got %q", got)
	}
}

// The variables are the runtime's (runtime/task.go inputVars).
func TestInputVars(t *testing.T) {
	for _, c := range []struct {
		offset int
		plain  bool
		want   string
	}{
		{0, false, "PIPEC_INPUT_raw"},
		{-1, true, "PIPEC_INPUT_raw_PREV"},
		{-1, false, "PIPEC_INPUT_raw PIPEC_INPUT_raw_PREV"},
		{-3, true, "PIPEC_INPUT_raw_PREV3"},
		{2, true, "PIPEC_INPUT_raw_NEXT2"},
	} {
		if got := strings.Join(InputVars("raw", c.offset, c.plain), " "); got != c.want {
			t.Errorf("InputVars(raw, %d, %v) = %q, want %q", c.offset, c.plain, got, c.want)
		}
	}
}
