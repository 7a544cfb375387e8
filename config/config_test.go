package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/golden"
	"github.com/pipec/pipec/lint"
)

func TestParseValid(t *testing.T) {
	src := `# repository settings
rules:
  retry-storm: off
  unused-artifact: error
  local-artifact: "info"
ignore:
  - terraform/
  - "**/*.pkr.hcl"
workers: 3
sarif:
  root: ..
`
	c, ds := Parse(".pipec.yaml", []byte(src))
	if len(ds) != 0 {
		t.Fatalf("findings on a valid file: %v", ds)
	}
	want := []RuleSetting{{ID: "local-artifact", Severity: diag.Info}, {ID: "retry-storm", Off: true}, {ID: "unused-artifact", Severity: diag.Error}}
	if len(c.Rules) != len(want) {
		t.Fatalf("rules %+v, want %+v", c.Rules, want)
	}
	for i := range want {
		if c.Rules[i] != want[i] {
			t.Errorf("rule %d: %+v, want %+v", i, c.Rules[i], want[i])
		}
	}
	if c.Workers != 3 || c.SARIFRoot != ".." || strings.Join(c.Ignore, ",") != "terraform,**/*.pkr.hcl" {
		t.Errorf("config %+v", c)
	}
	o := c.Options()
	if strings.Join(o.Disable, ",") != "retry-storm" || o.Workers != 3 {
		t.Errorf("options %+v", o)
	}
	if err := lint.CheckOptions(o); err != nil {
		t.Errorf("options from a valid file fail CheckOptions: %v", err)
	}
	got := c.Apply(diag.Diagnostics{{Rule: "unused-artifact", Severity: diag.Info}, {Rule: "cycle", Severity: diag.Error}})
	if got[0].Severity != diag.Error || got[1].Severity != diag.Error {
		t.Errorf("Apply: %v", got)
	}
}

// TestParseWorkerList reads the pool worker by worker: each worker's labels
// sorted and without repeats, a worker without labels offering none, and
// the count and labels handed to lint together.
func TestParseWorkerList(t *testing.T) {
	src := "workers:\n  - labels: [spark]\n  - labels: [spark, gpu, spark]\n  - {}\n  - labels: []\n"
	c, ds := Parse(".pipec.yaml", []byte(src))
	if len(ds) != 0 {
		t.Fatalf("findings on a valid file: %v", ds)
	}
	got := fmt.Sprint(c.WorkerLabels)
	if c.Workers != 4 || got != "[[spark] [gpu spark] [] []]" {
		t.Fatalf("workers %d, labels %s", c.Workers, got)
	}
	o := c.Options()
	if o.Workers != 4 || len(o.WorkerLabels) != 4 {
		t.Errorf("options %+v", o)
	}
	if err := lint.CheckOptions(o); err != nil {
		t.Errorf("options from a valid list fail CheckOptions: %v", err)
	}
	// A plain count keeps meaning a pool without labels.
	if c, _ := Parse(".pipec.yaml", []byte("workers: 2\n")); c.Workers != 2 || c.WorkerLabels != nil || c.Options().WorkerLabels != nil {
		t.Errorf("a count: %+v", c)
	}
}

// TestParseErrors checks every kind of mistake against a golden file of
// findings with positions, in the text format a spec's findings use.
func TestParseErrors(t *testing.T) {
	for _, name := range []string{"bad.yaml", "syntax.yaml", "list.yaml", "workers.yaml", "workers_empty.yaml", "long.yaml"} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join("testdata", name)
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			_, ds := Parse(filepath.ToSlash(file), src)
			if len(ds) == 0 {
				t.Fatal("no findings")
			}
			var b strings.Builder
			for _, d := range ds {
				b.WriteString(d.String() + "\n")
				if d.Range.Start.Line < 1 || d.Range.Start.Column < 1 {
					t.Errorf("finding without a position: %v", d)
				}
			}
			golden.Check(t, file+".out", []byte(b.String()))
		})
	}
}

// TestFindWalksUp places the file two folders above the working folder; a
// .git folder between them stops the walk.
func TestFindWalksUp(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, FileName), []byte("workers: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, ds, err := Find(deep)
	if err != nil || len(ds) != 0 {
		t.Fatal(err, ds)
	}
	if c.Workers != 4 || c.File != filepath.Join(root, FileName) || c.Dir != root {
		t.Errorf("found %+v", c)
	}
	// A relative folder gives a relative file name, as spec findings have.
	t.Chdir(deep)
	c, _, err = Find(".")
	if err != nil || c.File != filepath.Join("..", "..", FileName) {
		t.Errorf("relative: %v %q", err, c.File)
	}
	if err := os.Mkdir(filepath.Join(root, "a", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, _, err = Find(deep)
	if err != nil || c.File != "" || c.Workers != 0 {
		t.Errorf("walked past the repository root: %+v %v", c, err)
	}
}

func TestFindUnreadableIsAnError(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every file")
	}
	dir := t.TempDir()
	f := filepath.Join(dir, FileName)
	if err := os.WriteFile(f, []byte("workers: 2\n"), 0o000); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Find(dir); err == nil {
		t.Error("an unreadable configuration was not an error")
	}
}

func TestIgnored(t *testing.T) {
	c := &Config{Dir: "/repo", Ignore: []string{"terraform", "infra/**/*.hcl", "*.pkr.hcl", "/top.hcl"}}
	for p, want := range map[string]bool{
		"/repo/terraform/main.hcl":        true,
		"/repo/x/terraform/y/z.hcl":       true,
		"/repo/infra/a/b/c.hcl":           true,
		"/repo/infra/c.hcl":               true,
		"/repo/build/image.pkr.hcl":       true,
		"/repo/top.hcl":                   true,
		"/repo/sub/top.hcl":               false,
		"/repo/pipelines/orders.hcl":      false,
		"/repo/infrastructure/orders.hcl": false,
		"/elsewhere/terraform/main.hcl":   false,
	} {
		if got := c.Ignored(p); got != want {
			t.Errorf("Ignored(%q) = %v, want %v", p, got, want)
		}
	}
}

// FuzzParse feeds arbitrary YAML to the parser: nothing may panic, every
// finding is the config rule's, at a line of the file, and the same bytes
// give the same configuration and findings.
func FuzzParse(f *testing.F) {
	for _, src := range []string{"", "~", "[]", "- a", "rules: [", "rules:\n  ? [a]\n  : b\n", "a: &x 1\nb: *x\n", "workers: 1e999", "workers: 99999999999999999999", "workers: [~]", "workers: [{labels: ~}]", "workers: [{labels: [[a]]}]", "workers: [&a {labels: [x]}, *a]", "workers: [{labels: [x], labels: [y]}]", "workers: {labels: [x]}", "\x00\xff"} {
		f.Add([]byte(src))
	}
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		c, ds := Parse("p.yaml", src)
		lines := lineCount(src) // YAML breaks lines at \r too, as editors do
		for _, d := range ds {
			if d.Rule != Rule || d.Message == "" {
				t.Fatalf("finding of another rule or without message: %+v", d)
			}
			if d.Range.Start.Line < 1 || d.Range.Start.Line > lines || d.Range.Start.Column < 1 {
				t.Fatalf("finding outside the file (%d lines): %s", lines, d)
			}
		}
		if len(c.WorkerLabels) != 0 && len(c.WorkerLabels) != c.Workers {
			t.Fatalf("%d workers with %d label sets", c.Workers, len(c.WorkerLabels))
		}
		c2, ds2 := Parse("p.yaml", src)
		if diff := cmp.Diff([]any{c, ds}, []any{c2, ds2}); diff != "" {
			t.Fatalf("two parses differ (-first +second):\n%s", diff)
		}
		c.Dir = "/repo"
		c.Options()
		for _, p := range []string{"a.hcl", "terraform/main.tf", "x/y/z.pkr.hcl", ""} {
			c.Ignored(p)
		}
	})
}
