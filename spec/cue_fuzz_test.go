package spec

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoadCUE feeds arbitrary bytes to the CUE loader, seeded with every spec
// under testdata/cue: it must never panic, and every finding must be placed
// in the file (a file name, a line and a column of at least 1).
//
//	go test ./spec -run '^$' -fuzz FuzzLoadCUE -fuzztime 2m
func FuzzLoadCUE(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "cue", "*", "*.cue"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seed specs: %v", err)
	}
	for _, s := range seeds {
		src, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
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
			if d.Rule != RuleSyntax && d.Rule != RuleSchema {
				t.Fatalf("unexpected rule: %v", d)
			}
		}
		if p == nil && !ds.HasErrors() {
			t.Fatalf("no pipeline and no error")
		}
	})
}
