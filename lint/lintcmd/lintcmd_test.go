package lintcmd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/spec"
)

// readCounter counts reads of standard input.
type readCounter struct{ n int }

func (r *readCounter) Read([]byte) (int, error) { r.n++; return 0, errors.New("read") }

// TestHCLOnlyStopsBeforePrinting: with HCL alone, a run that meets a .cue
// file (named, found in a folder, or named by --stdin-filename) ends with an
// *UnreadSyntaxError before printing anything or reading standard input, so
// the whole run can be handed to pipec; an ignored .cue file is no reason to.
func TestHCLOnlyStopsBeforePrinting(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"a/p.hcl":     readFile(t, "../../examples/orders/pipeline.hcl"),
		"a/q.cue":     readFile(t, "../../examples/orders/pipeline.cue"),
		"b/p.hcl":     readFile(t, "../../examples/orders/pipeline.hcl"),
		"b/old/q.cue": readFile(t, "../../examples/orders/pipeline.cue"),
		".pipec.yaml": "ignore:\n  - b/old/\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	for _, tc := range []struct {
		args    []string
		opts    Options
		handOff bool
	}{
		{[]string{"a/q.cue"}, Options{}, true},
		{[]string{"a"}, Options{}, true},
		{[]string{"a/p.hcl", "a/q.cue"}, Options{SkipNonSpecs: true}, true},
		{[]string{"-"}, Options{StdinFilename: "x.cue"}, true},
		{[]string{"b"}, Options{}, false},
		{[]string{"b/old/q.cue", "b/p.hcl"}, Options{}, false},
	} {
		var out, errb bytes.Buffer
		stdin := &readCounter{}
		io := IO{Stdin: stdin, Stdout: &out, Stderr: &errb, Color: func(bool) bool { return false }}
		tc.opts.Format = "text"
		err := Run(io, HCLOnly{}, "test", tc.args, tc.opts)
		var unread *UnreadSyntaxError
		if got := errors.As(err, &unread); got != tc.handOff {
			t.Errorf("%v: error %v; want a hand-over: %v", tc.args, err, tc.handOff)
		}
		if tc.handOff && (out.Len() > 0 || errb.Len() > 0 || stdin.n > 0 || unread.Syntax != spec.SyntaxCUE) {
			t.Errorf("%v: printed %q %q, read stdin %d times, syntax %q before handing over", tc.args, out.String(), errb.String(), stdin.n, unread.Syntax)
		}
		if !tc.handOff && !strings.Contains(out.String(), "heartbeat-lease") {
			t.Errorf("%v: the HCL spec was not linted: %q", tc.args, out.String())
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
