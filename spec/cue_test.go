package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/diag"
)

// cueUpdateGolden regenerates golden files instead of comparing with them.
var cueUpdateGolden = os.Getenv("PIPEC_UPDATE_GOLDEN") == "1"

// cueCheckGolden compares got with the golden file at path.
func cueCheckGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if cueUpdateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with PIPEC_UPDATE_GOLDEN=1 to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (PIPEC_UPDATE_GOLDEN=1 regenerates it)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// cueDiagLines renders diagnostics one per line, as pipec lint prints them.
func cueDiagLines(ds diag.Diagnostics) []byte {
	var b strings.Builder
	for _, d := range ds.Sort() {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

func cueSpecFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "cue", dir, "*.cue"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no spec files in testdata/cue/%s: %v", dir, err)
	}
	return files
}

// cueDump writes the model as indented JSON, each range folded to
// "line:col-line:col" (the file name is the spec's, so it is left out).
func cueDump(t *testing.T, p *Pipeline) []byte {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(cueFoldRanges(v), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

func cueFoldRanges(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if s, ok := x["start"].(map[string]any); ok {
			if e, ok := x["end"].(map[string]any); ok {
				return fmt.Sprintf("%v:%v-%v:%v", s["line"], s["column"], e["line"], e["column"])
			}
		}
		for k, e := range x {
			x[k] = cueFoldRanges(e)
		}
	case []any:
		for i, e := range x {
			x[i] = cueFoldRanges(e)
		}
	}
	return v
}

// TestLoadCUEValid loads every valid spec: no diagnostic, and the model as
// a JSON dump equal to its golden file.
func TestLoadCUEValid(t *testing.T) {
	for _, file := range cueSpecFiles(t, "ok") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			p, ds := LoadCUE(file, src)
			if len(ds) > 0 {
				t.Fatalf("unexpected diagnostics:\n%s", cueDiagLines(ds))
			}
			if p == nil {
				t.Fatal("no pipeline")
			}
			cueCheckGolden(t, strings.TrimSuffix(file, ".cue")+".json", cueDump(t, p))
		})
	}
}

// TestLoadCUEErrors loads every broken spec and compares its diagnostics with
// the golden .out file.
func TestLoadCUEErrors(t *testing.T) {
	for _, file := range cueSpecFiles(t, "err") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			_, ds := LoadCUE(file, src)
			if !ds.HasErrors() {
				t.Fatalf("no error reported")
			}
			for _, d := range ds {
				if d.Range.Filename != file || d.Range.Start.Line < 1 || d.Range.Start.Column < 1 {
					t.Errorf("diagnostic not placed in the file: %v", d)
				}
			}
			cueCheckGolden(t, strings.TrimSuffix(file, ".cue")+".out", cueDiagLines(ds))
		})
	}
}
