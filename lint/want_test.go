package lint

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
)

// wantComment finds `want "rule-id" ...` in a // or # comment, as
// analysistest does: the finding must be on the comment's line.
var (
	wantComment = regexp.MustCompile(`(?://|#)\s*want((?:\s+"[^"]*")+)`)
	wantID      = regexp.MustCompile(`"([^"]*)"`)
)

// TestWant lints every spec under testdata/src, HCL and CUE alike, and
// compares the findings (loader, compiler and lint) with the `want` comments:
// a finding without a want, and a want without a finding, both fail.
func TestWant(t *testing.T) {
	files, err := filepath.Glob("testdata/src/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no test specs")
	}
	covered := map[string]map[spec.Syntax]bool{}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ds, src := lintFile(t, f)
			want := wants(src)
			syn, _ := spec.SyntaxOf(f)
			for _, w := range want {
				if covered[w.rule] == nil {
					covered[w.rule] = map[spec.Syntax]bool{}
				}
				covered[w.rule][syn] = true
			}
			got := make([]lineRule, 0, len(ds))
			for _, d := range ds {
				got = append(got, lineRule{d.Range.Start.Line, d.Rule})
			}
			for _, w := range want {
				if i := slices.Index(got, w); i >= 0 {
					got = slices.Delete(got, i, i+1)
					continue
				}
				t.Errorf("%s:%d: missing finding [%s]", f, w.line, w.rule)
			}
			for _, g := range got {
				for _, d := range ds {
					if d.Range.Start.Line == g.line && d.Rule == g.rule {
						t.Errorf("unexpected finding: %s", d)
						break
					}
				}
			}
		})
	}
	// Every rule lint runs has a firing case in each syntax; the compiler's
	// rules are tested with the compiler but appear here when they meet a
	// lint rule.
	for _, r := range All() {
		for _, syn := range []spec.Syntax{spec.SyntaxHCL, spec.SyntaxCUE} {
			if r.Reported() && !covered[r.ID][syn] {
				t.Errorf("rule %s has no want in a %s spec under testdata/src", r.ID, syn)
			}
		}
	}
}

type lineRule struct {
	line int
	rule string
}

func wants(src []byte) []lineRule {
	var out []lineRule
	for i, line := range strings.Split(string(src), "\n") {
		for _, m := range wantComment.FindAllStringSubmatch(line, -1) {
			for _, id := range wantID.FindAllStringSubmatch(m[1], -1) {
				out = append(out, lineRule{i + 1, id[1]})
			}
		}
	}
	return out
}

// lintFile loads, compiles and lints one spec as pipec lint does, with a
// fixed reference time.
func lintFile(t testing.TB, f string) (diag.Diagnostics, []byte) {
	t.Helper()
	p, src, ds, err := spec.LoadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if p == nil {
		return ds, src
	}
	res, cds := compiler.Compile(p)
	ds = append(ds, cds...)
	ds = append(ds, Run(res, src, Options{Now: fixedNow})...)
	return ds.Sort(), src
}

func TestWantParser(t *testing.T) {
	got := wants([]byte("a = 1 // want \"x\" \"y\"\n# want \"z\"\nb = \"want\"\n"))
	want := []lineRule{{1, "x"}, {1, "y"}, {2, "z"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
