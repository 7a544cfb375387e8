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
	"github.com/pipec/pipec/spec/specload"
)

// wantComment finds `want "rule-id" ...` in a // or # comment, as
// analysistest does: the finding must be on the comment's line. An
// expectation may carry a message pattern after the id and ": ", as in
// `want "retry-storm: no backoff"`: the finding's message must then match
// that regular expression too. Quotes inside a pattern are written \x22.
var (
	wantComment = regexp.MustCompile(`(?://|#)\s*want((?:\s+"[^"]*")+)`)
	wantID      = regexp.MustCompile(`"([^"]*)"`)
	// lintWorkers declares the worker pool a spec is linted on, worker by
	// worker, as the configuration file's workers list does: `lint-workers:
	// spark spark,gpu -` is three workers, offering spark, spark and gpu,
	// and nothing.
	lintWorkers = regexp.MustCompile(`(?m)(?://|#)\s*lint-workers:((?:[ \t]+\S+)+)`)
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
			want, err := wants(src)
			if err != nil {
				t.Fatal(err)
			}
			syn, _ := spec.SyntaxOf(f)
			for _, w := range want {
				if covered[w.rule] == nil {
					covered[w.rule] = map[spec.Syntax]bool{}
				}
				covered[w.rule][syn] = true
			}
			// Expectations with a pattern take their findings first, so an
			// expectation without one cannot take the finding a pattern needs.
			slices.SortStableFunc(want, func(a, b lineRule) int {
				return boolCmp(b.pattern != nil, a.pattern != nil)
			})
			got := slices.Clone(ds)
			for _, w := range want {
				if i := slices.IndexFunc(got, w.matches); i >= 0 {
					got = slices.Delete(got, i, i+1)
					continue
				}
				if w.pattern != nil {
					t.Errorf("%s:%d: missing finding [%s] matching %q", f, w.line, w.rule, w.pattern)
				} else {
					t.Errorf("%s:%d: missing finding [%s]", f, w.line, w.rule)
				}
			}
			for _, d := range got {
				t.Errorf("unexpected finding: %s", d)
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

// lineRule is one expectation: a finding of rule on line, whose message
// matches pattern when there is one.
type lineRule struct {
	line    int
	rule    string
	pattern *regexp.Regexp
}

func (w lineRule) matches(d diag.Diagnostic) bool {
	return d.Range.Start.Line == w.line && d.Rule == w.rule && (w.pattern == nil || w.pattern.MatchString(d.Message))
}

func (w lineRule) String() string {
	if w.pattern == nil {
		return fmt.Sprintf("%d:%s", w.line, w.rule)
	}
	return fmt.Sprintf("%d:%s:%s", w.line, w.rule, w.pattern)
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// wants reads the expectations of a spec; a pattern that is not a valid
// regular expression is an error of the test data.
func wants(src []byte) ([]lineRule, error) {
	var out []lineRule
	for i, line := range strings.Split(string(src), "\n") {
		for _, m := range wantComment.FindAllStringSubmatch(line, -1) {
			for _, id := range wantID.FindAllStringSubmatch(m[1], -1) {
				w := lineRule{line: i + 1, rule: id[1]}
				if rule, pat, ok := strings.Cut(id[1], ": "); ok {
					re, err := regexp.Compile(pat)
					if err != nil {
						return nil, fmt.Errorf("line %d: want %q: %v", i+1, id[1], err)
					}
					w.rule, w.pattern = rule, re
				}
				out = append(out, w)
			}
		}
	}
	return out, nil
}

// lintFile loads, compiles and lints one spec as pipec lint does, with a
// fixed reference time.
func lintFile(t testing.TB, f string) (diag.Diagnostics, []byte) {
	t.Helper()
	p, src, ds, err := specload.LoadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if p == nil {
		return ds, src
	}
	res, cds := compiler.Compile(p)
	ds = append(ds, cds...)
	opts := Options{Now: fixedNow}
	if m := lintWorkers.FindSubmatch(src); m != nil {
		for _, w := range strings.Fields(string(m[1])) {
			var labels []string
			if w != "-" {
				labels = strings.Split(w, ",")
			}
			opts.WorkerLabels = append(opts.WorkerLabels, labels)
		}
		opts.Workers = len(opts.WorkerLabels)
	}
	ds = append(ds, Run(res, src, opts)...)
	return ds.Sort(), src
}

func TestWantParser(t *testing.T) {
	got, err := wants([]byte("a = 1 // want \"x\" \"y: no back+off\"\n# want \"z\"\nb = \"want\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[1:x 1:y:no back+off 2:z]" {
		t.Fatalf("got %v", got)
	}
	d := diag.Diagnostic{Rule: "y", Message: "so no backoff here", Range: diag.Range{Start: diag.Pos{Line: 1}}}
	if !got[1].matches(d) {
		t.Error("the pattern does not match its message")
	}
	if d.Message = "no back-off"; got[1].matches(d) {
		t.Error("the pattern matches another message")
	}
	if _, err := wants([]byte("# want \"x: (\"")); err == nil {
		t.Error("an invalid pattern was accepted")
	}
}
