package lint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/spec"
)

// FuzzLint feeds arbitrary HCL through the loader, the compiler and every
// rule, on a pool described with its labels (so failover-limits judges
// labelled tasks on their eligible workers too): nothing may panic, and
// every finding must have a rule and a position inside the file.
func FuzzLint(f *testing.F) {
	fuzzPool := [][]string{{"spark"}, {"gpu", "spark"}, nil}
	files, _ := filepath.Glob("testdata/src/*.hcl")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		p, _ := spec.Load(spec.SyntaxHCL, "f.hcl", src)
		if p == nil {
			return
		}
		res, _ := compiler.Compile(p)
		lines := strings.Count(string(src), "\n") + 1
		for _, d := range Run(res, src, Options{Now: fixedNow, Workers: 3, WorkerLabels: fuzzPool}) {
			if d.Rule == "" || d.Message == "" {
				t.Fatalf("finding without rule or message: %+v", d)
			}
			if d.Range.Start.Line < 1 || d.Range.Start.Line > lines {
				t.Fatalf("finding outside the file (%d lines): %s", lines, d)
			}
		}
	})
}

// FuzzSuppressions scans arbitrary text for pipec:ignore comments: no panic,
// and every comment's range lies on its line.
func FuzzSuppressions(f *testing.F) {
	f.Add([]byte("a = 1 // pipec:ignore x reason\n# pipec:ignore y,z\n"), true)
	f.Add([]byte("x = <<EOF\n# pipec:ignore a b\nEOF\n// pipec:ignore\n"), true)
	f.Add([]byte("a: \"\"\"\n// pipec:ignore a b\n\"\"\"\nb: \"\\\"// pipec:ignore c\" // pipec:ignore d e\n"), false)
	f.Fuzz(func(t *testing.T, src []byte, hcl bool) {
		name := "f.cue"
		if hcl {
			name = "f.hcl"
		}
		lines := strings.Split(string(src), "\n")
		for _, s := range scanSuppressions(name, src) {
			l := s.at.Start.Line
			if l < 1 || l > len(lines) || s.at.End.Line != l || s.target < 0 || s.target > len(lines) {
				t.Fatalf("bad suppression range %+v (target %d) in %d lines", s.at, s.target, len(lines))
			}
			if s.at.Start.Column > utf8.RuneCountInString(lines[l-1])+1 {
				t.Fatalf("column %d beyond line %q", s.at.Start.Column, lines[l-1])
			}
		}
	})
}
