package gendag_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/gendag"
	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/spec/specload"
)

// TestSpecsCompileAndLint: for a small n, both specs load, compile to the
// same plan and lint without an error finding, so `pipec lint` and
// `pipec run` take them (retry-storm warns: many tasks retried, no budget).
func TestSpecsCompileAndLint(t *testing.T) {
	d, err := gendag.Generate(60, 42)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := d.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	var plans [][]byte
	for _, name := range []string{"pipeline.hcl", "pipeline.cue"} {
		path := filepath.Join(dir, name)
		p, src, ds, err := specload.LoadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) > 0 {
			t.Fatalf("%s: loader findings: %v", name, ds)
		}
		res, ds := compiler.Compile(p)
		if len(ds) > 0 {
			t.Fatalf("%s: compiler findings: %v", name, ds)
		}
		if got := len(res.Plan.Order); got < 60 {
			t.Errorf("%s: plan orders %d nodes, want the 60 tasks at least", name, got)
		}
		for _, f := range lint.Run(res, src, lint.Options{Now: time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)}) {
			if f.Severity == diag.Error {
				t.Errorf("%s: %v", name, f)
			}
		}
		plans = append(plans, res.Plan.Marshal())
	}
	if !bytes.Equal(plans[0], plans[1]) {
		t.Error("the HCL and CUE specs give different plans")
	}
}

// TestDeterministic: one (n, seed) gives the same bytes every time, another
// seed another DAG.
func TestDeterministic(t *testing.T) {
	gen := func(seed int64) map[string][]byte {
		d, err := gendag.Generate(40, seed)
		if err != nil {
			t.Fatal(err)
		}
		return d.Files()
	}
	a, b, c := gen(42), gen(42), gen(7)
	for name := range a {
		if !bytes.Equal(a[name], b[name]) {
			t.Errorf("%s differs between two runs with one seed", name)
		}
		if name != "Makefile" && bytes.Equal(a[name], c[name]) {
			t.Errorf("%s is the same for seeds 42 and 7", name)
		}
	}
}

// TestSameFamily pins the 1,000-task DAG of seed 42, which bench/run1k.sh and
// the runtime's figures are measured on, to the bytes of the generator those
// figures were first taken with: a change here makes old and new figures
// incomparable, so it must be deliberate.
func TestSameFamily(t *testing.T) {
	want := map[string]string{
		"pipeline.hcl": "b52e715ab62f1477c3d921c23e46a33bfe52912e5664ffdbfc9abfa4b9ef4f4c",
		"pipeline.cue": "9a07888f8e56c2cf8d3e5dec2f18037d2f73aad46f284d6615f68ba98b90732c",
		"workflow.yml": "fdef4e0fe2b0a2c92ae757480c111b6cd4140cc486af0b7713c6fd16dffc477b",
		"Makefile":     "46319e12096ae1104e8bf943a78712fd8e6827d73e871309f746a74201be01c6",
	}
	d, err := gendag.Generate(1000, 42)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range d.Files() {
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != want[name] {
			t.Errorf("%s: sha256 %s, want %s", name, got, want[name])
		}
	}
}

func TestTooSmall(t *testing.T) {
	if _, err := gendag.Generate(1, 42); err == nil {
		t.Error("Generate(1) made a DAG; it needs at least 2 tasks")
	}
}

func TestWriteFiles(t *testing.T) {
	d, err := gendag.Generate(5, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "new")
	if err := d.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range d.Files() {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s on disk differs from Files()", name)
		}
	}
}
