package cuespec

import (
	"os"
	"testing"

	"github.com/pipec/pipec/internal/tracked"
	"github.com/pipec/pipec/spec"
)

// TestIsPipeline recognises CUE specs by parsing: a top-level pipeline field,
// also in a file that does not parse; not a nested one.
func TestIsPipeline(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want bool
	}{
		{"cue", "package p\n\npipeline: orders: {}\n", true},
		{"cue broken", "pipeline: orders: {\n", true},
		{"cue other", "package k8s\n\ndeployment: pipeline: {}\n", false},
		{"binary", "pipeline: o: {\x00}", false},
		{"bom", "\xef\xbb\xbfpipeline: o: {}", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsPipeline([]byte(tc.src)); got != tc.want {
				t.Errorf("IsPipeline(%q) = %v, want %v", tc.src, got, tc.want)
			}
		})
	}
}

// TestShippedExamplesAreSpecs: every CUE example is found.
func TestShippedExamplesAreSpecs(t *testing.T) {
	for _, f := range tracked.Glob(t, "../..", "examples/*/*.cue") {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := spec.SyntaxOf(f); !ok || !IsPipeline(src) {
			t.Errorf("%s is not recognised as a spec", f)
		}
	}
}

// The fast path (a prefix parsed) decides as the full parse does, including
// where the line that looks like a pipeline field is not one.
func TestFastPathAgreesWithFullParse(t *testing.T) {
	cue := []string{
		"pipeline: o: {}\n",
		"package p\n\npipeline: o: {}\n",
		"x: \"\"\"\npipeline: o\n\"\"\"\n",
		"x: {\npipeline: o: {}\n}\n",
		"x: {\npipeline: o: {}\n",
		"pipeline: o: {\n",
		"deployment: pipeline: {}\n",
		"pipelin: o: {}\n",
	}
	for _, src := range cue {
		if fast, full := cueHasPipelineField([]byte(src)), cueParseHasPipelineField([]byte(src)); fast != full {
			t.Errorf("CUE %q: fast %v, full %v", src, fast, full)
		}
	}
}
