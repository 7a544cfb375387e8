package lsp_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/lsp"
)

// The workers .pipec.yaml lists, with their labels, reach the language
// server's lint as they reach pipec lint's: a task whose labels no listed
// worker offers is reported at its labels, and a pipeline on two workers
// handing an artifact between tasks without a shared store at its block.
func TestConfigurationWorkerLabels(t *testing.T) {
	configure := func(dir string) {
		t.Helper()
		for _, f := range [][2]string{
			{".git/HEAD", "ref: refs/heads/main\n"},
			{".pipec.yaml", "workers:\n  - labels: [spark]\n  - {}\n"},
		} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f[0])), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := start(t, lsp.Options{})
	configure(c.dir)
	src := `pipeline "p" {
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw"]
    labels  = ["gpu"]
  }
  task "load" {
    command = ["./load.sh"]
    inputs  = ["raw"]
    labels  = ["spark"]
  }
}
`
	u := c.open("specs/p.hcl", src)
	ds := c.waitVersion(u, 1)
	if got := strings.Join(codes(ds), ","); got != "local-artifact,failover-limits" {
		t.Fatalf("codes = %s (%+v)", got, ds)
	}
	if ds[0].Range.Start.Line != 0 || !strings.Contains(ds[0].Message, "set artifacts") {
		t.Errorf("local-artifact: %+v", ds[0])
	}
	if ds[1].Range.Start.Line != 4 || !strings.Contains(ds[1].Message, "none of the 2 declared workers offers gpu") {
		t.Errorf("failover-limits: %+v", ds[1])
	}
	// The flag's pool replaces the file's, labels and all: one worker, no
	// labels known.
	c2 := start(t, lsp.Options{Workers: 1})
	configure(c2.dir)
	u2 := c2.open("specs/p.hcl", src)
	if got := codes(c2.waitVersion(u2, 1)); len(got) != 0 {
		t.Fatalf("with --workers 1: %v", got)
	}
}
