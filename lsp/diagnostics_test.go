package lsp_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/protocol"

	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/lsp"
)

func codes(ds []protocol.Diagnostic) []string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprint(d.Code))
	}
	return out
}

// Every lint finding arrives with its range, severity, rule id as code and
// a link to the rule's page, in HCL and in CUE.
func TestDiagnosticsCarryRuleRangeAndLink(t *testing.T) {
	for _, name := range []string{"refs.hcl", "refs.cue"} {
		t.Run(name, func(t *testing.T) {
			c := start(t, lsp.Options{})
			src := readFile(t, "testdata/"+name)
			u := c.open(name, src)
			ds := c.waitVersion(u, 1)
			if got := strings.Join(codes(ds), ","); got != "heartbeat-lease,interval-mismatch" {
				t.Fatalf("codes = %s", got)
			}
			im := ds[1]
			if want := span(t, src, "inputs", `"clean_out@-1"`); im.Range != want {
				t.Errorf("interval-mismatch range = %+v, want %+v", im.Range, want)
			}
			if im.Severity != protocol.DiagnosticSeverityError || ds[0].Severity != protocol.DiagnosticSeverityWarning {
				t.Errorf("severities = %v, %v", im.Severity, ds[0].Severity)
			}
			if im.CodeDescription == nil || string(im.CodeDescription.Href) != lint.DocURL("interval-mismatch") {
				t.Errorf("codeDescription = %+v", im.CodeDescription)
			}
			if im.Source != "pipec" || !strings.Contains(im.Message, `reads "clean_out@-1"`) {
				t.Errorf("source %q, message %q", im.Source, im.Message)
			}
		})
	}
}

// A change that fixes a finding publishes the document's diagnostics again
// without it.
func TestChangeThatFixesAFindingClearsIt(t *testing.T) {
	for _, name := range []string{"refs.hcl", "refs.cue"} {
		t.Run(name, func(t *testing.T) {
			c := start(t, lsp.Options{})
			src := readFile(t, "testdata/"+name)
			u := c.open(name, src)
			if got := codes(c.waitVersion(u, 1)); len(got) != 2 {
				t.Fatalf("before: %v", got)
			}
			fixed := strings.Replace(src, `"clean_out@-1"`, `"raw"`, 1)
			c.change(u, 2, fixed)
			if got := codes(c.waitVersion(u, 2)); strings.Join(got, ",") != "heartbeat-lease" {
				t.Fatalf("after the fix: %v", got)
			}
		})
	}
}

// Fast changes publish results in order and end with the newest text's: a
// result for an older text never arrives after a newer one.
func TestFastChangesPublishOnlyNewerResults(t *testing.T) {
	for _, debounce := range []int{-1, 0} {
		t.Run(fmt.Sprint("debounce", debounce), func(t *testing.T) {
			c := start(t, lsp.Options{Debounce: lspDebounce(debounce)})
			src := bigSpec(300)
			u := c.open("big.hcl", src)
			const n = 40
			for v := 2; v <= n; v++ {
				text := src
				if v%2 == 0 {
					// Even versions break a dependency, odd ones are clean; the
					// last (n, even) must end broken.
					text = strings.Replace(src, `depends_on = ["t0"]`, fmt.Sprintf(`depends_on = ["t0x%d"]`, v), 1)
				}
				c.change(u, int32(v), text)
			}
			final := c.waitVersion(u, n)
			var md []string
			for _, d := range final {
				if d.Code == "missing-dependency" {
					md = append(md, d.Message)
				}
			}
			if len(md) != 1 || !strings.Contains(md[0], fmt.Sprintf(`"t0x%d"`, n)) {
				t.Fatalf("final missing-dependency findings are not the newest text's: %q", md)
			}
			// The exit in cleanup stops the workers; everything published by
			// then must be in version order.
			var last uint32
			for _, p := range c.publishedFor(u) {
				if p.Version < last {
					t.Fatalf("version %d published after version %d", p.Version, last)
				}
				last = p.Version
			}
			if len(c.publishedFor(u)) == n {
				t.Logf("every version was published (no coalescing happened this run)")
			}
		})
	}
}

func lspDebounce(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }

// bigSpec is a chain of n tasks; task t1 depends on t0 explicitly.
func bigSpec(n int) string {
	var b strings.Builder
	b.WriteString("pipeline \"big\" {\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  task \"t%d\" {\n    command = [\"./run.sh\"]\n    outputs = [\"a%d\"]\n", i, i)
		if i > 0 {
			fmt.Fprintf(&b, "    inputs = [\"a%d\"]\n", i-1)
		}
		if i == 1 {
			b.WriteString("    depends_on = [\"t0\"]\n")
		}
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// Other HCL (a Terraform file) gets nothing: no diagnostics (not even an
// empty list), no hover. Once it becomes a spec it is linted, and when it
// stops being one its findings are cleared.
func TestNonPipelineHCLGetsNothing(t *testing.T) {
	c := start(t, lsp.Options{})
	src := "resource \"aws_s3_bucket\" \"b\" {\n  bucket = \"x\"\n  task = nope\n}\n"
	u := c.open("main.hcl", src)
	var h *protocol.Hover
	c.call(protocol.MethodTextDocumentHover, &protocol.HoverParams{TextDocumentPositionParams: pos(u, at(t, src, "", "bucket", 1))}, &h)
	if h != nil {
		t.Fatalf("hover on a non-pipeline file: %+v", h)
	}
	spec := strings.Replace(readFile(t, "testdata/refs.hcl"), `["extract"]`, `["nope"]`, 1)
	c.change(u, 2, spec)
	if ds := c.waitVersion(u, 2); len(ds) == 0 {
		t.Fatal("no findings once the file is a spec")
	}
	if ps := c.publishedFor(u); len(ps) != 1 {
		t.Fatalf("publishes before the file was a spec: %+v", ps)
	}
	c.change(u, 3, src)
	if ds := c.waitVersion(u, 3); len(ds) != 0 {
		t.Fatalf("findings not cleared when the file stopped being a spec: %v", codes(ds))
	}
}

// The same pipec:ignore comments as the command line suppress a finding.
func TestSuppressionCommentsApply(t *testing.T) {
	c := start(t, lsp.Options{})
	src := strings.Replace(readFile(t, "testdata/refs.hcl"), "    retry = \"gentle\"\n",
		"    # pipec:ignore heartbeat-lease the script times itself out\n    retry = \"gentle\"\n", 1)
	u := c.open("refs.hcl", src)
	if got := strings.Join(codes(c.waitVersion(u, 1)), ","); got != "interval-mismatch" {
		t.Fatalf("codes = %s", got)
	}
}

// The server's flags (the command line's --disable) apply.
func TestDisableFlagApplies(t *testing.T) {
	c := start(t, lsp.Options{Disable: []string{"heartbeat-lease"}})
	u := c.open("refs.cue", readFile(t, "testdata/refs.cue"))
	if got := strings.Join(codes(c.waitVersion(u, 1)), ","); got != "interval-mismatch" {
		t.Fatalf("codes = %s", got)
	}
}

// The .pipec.yaml above a spec applies as for pipec lint: a rule off, a
// rule re-graded, a path ignored; a mistake in it is shown on the file, and
// its valid parts still apply.
func TestConfigurationFileApplies(t *testing.T) {
	c := start(t, lsp.Options{})
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(c.dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(c.dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".git/HEAD", "ref: refs/heads/main\n") // the repository's root: Find stops here
	write(".pipec.yaml", "rules:\n  heartbeat-lease: off\n  interval-mismatch: info\nignore:\n  - infra\n")
	src := readFile(t, "testdata/refs.hcl")
	u := c.open("specs/refs.hcl", src)
	ds := c.waitVersion(u, 1)
	if got := strings.Join(codes(ds), ","); got != "interval-mismatch" || ds[0].Severity != protocol.DiagnosticSeverityInformation {
		t.Fatalf("codes = %s, severity %v", got, ds[0].Severity)
	}
	ig := c.open("infra/refs.hcl", src)
	var syms []protocol.DocumentSymbol
	c.call(protocol.MethodTextDocumentDocumentSymbol, &protocol.DocumentSymbolParams{TextDocument: protocol.TextDocumentIdentifier{URI: ig}}, &syms)
	if len(syms) != 0 {
		t.Fatalf("an ignored path is treated as a spec: %+v", syms)
	}
	// A mistake in the file: its finding goes to the file; the rest holds.
	write(".pipec.yaml", "rules:\n  heartbeat-lease: off\n  retry-strom: off\nignore:\n  - infra\n")
	cfg := protocol.DocumentURI("file://" + filepath.ToSlash(filepath.Join(c.dir, ".pipec.yaml")))
	c.notify(protocol.MethodTextDocumentDidSave, &protocol.DidSaveTextDocumentParams{TextDocument: protocol.TextDocumentIdentifier{URI: cfg}})
	var cds []protocol.Diagnostic
	for cds == nil {
		c.waitVersion(cfg, 0)
		for _, p := range c.publishedFor(cfg) {
			cds = p.Diagnostics
		}
	}
	if len(cds) != 1 || cds[0].Code != "config" || cds[0].CodeDescription != nil || !strings.Contains(cds[0].Message, `did you mean "retry-storm"`) || cds[0].Range.Start.Line != 2 {
		t.Fatalf("configuration findings = %+v", cds)
	}
	c.change(u, 2, src)
	if got := strings.Join(codes(c.waitVersion(u, 2)), ","); got != "interval-mismatch" {
		t.Fatalf("with a half-valid configuration: %s", got)
	}
	if ps := c.publishedFor(ig); len(ps) != 0 {
		t.Fatalf("an ignored path got diagnostics: %+v", ps)
	}
}

// A syntax error is reported alone, with no follow-on findings, and a
// document closed gets its diagnostics cleared.
func TestSyntaxErrorAndClose(t *testing.T) {
	c := start(t, lsp.Options{})
	u := c.open("bad.cue", "pipeline: p: {\n\ttask: a: {command: [\"x\"]\n")
	ds := c.waitVersion(u, 1)
	if got := strings.Join(codes(ds), ","); got != "syntax" {
		t.Fatalf("codes = %s", got)
	}
	c.notify(protocol.MethodTextDocumentDidClose, &protocol.DidCloseTextDocumentParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}})
	if ds := c.waitVersion(u, 0); len(ds) != 0 {
		t.Fatalf("after close: %v", codes(ds))
	}
}

// Incremental changes (what editors send on a keystroke) are applied in
// order, each in the text the previous one left, in UTF-16 positions.
func TestIncrementalChanges(t *testing.T) {
	c := start(t, lsp.Options{})
	src := readFile(t, "testdata/refs.hcl")
	u := c.open("refs.hcl", src)
	c.waitVersion(u, 1)
	// Remove the input of the previous interval, then insert a comment with a non-BMP
	// character before the task, then type "é" right after it: the second
	// edit's column counts the emoji as two UTF-16 units.
	r := span(t, src, "inputs", `, "clean_out@-1"`)
	line := at(t, src, "", `  task "clean"`, 0)
	c.edit(u, 2,
		contentChange{Range: &r, Text: ""},
		contentChange{Range: &protocol.Range{Start: line, End: line}, Text: "  # 🚀\n"},
		contentChange{Range: &protocol.Range{Start: protocol.Position{Line: line.Line, Character: 6}, End: protocol.Position{Line: line.Line, Character: 6}}, Text: "é"},
	)
	if got := strings.Join(codes(c.waitVersion(u, 2)), ","); got != "heartbeat-lease" {
		t.Fatalf("after the edits: %s", got)
	}
	var edits []protocol.TextEdit
	c.call(protocol.MethodTextDocumentFormatting, &protocol.DocumentFormattingParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}}, &edits)
	if len(edits) != 1 || !strings.Contains(edits[0].NewText, "  # 🚀é\n  task \"clean\" {") || strings.Contains(edits[0].NewText, "@-1") {
		t.Fatalf("the server's text is not the edited one: %+v", edits)
	}
}

// Changes wait for the debounce before they are linted; requests still
// answer about the newest text, and a save lints at once. With a debounce
// no test outlives, the publishes are exactly those of open and save.
func TestDebounceAndSave(t *testing.T) {
	c := start(t, lsp.Options{Debounce: time.Hour})
	src := readFile(t, "testdata/refs.hcl")
	u := c.open("refs.hcl", src)
	c.waitVersion(u, 1)
	broken := strings.Replace(src, `["extract"]`, `["extrac"]`, 1)
	for v := int32(2); v <= 10; v++ {
		c.change(u, v, broken)
	}
	var as []protocol.CodeAction
	c.call(protocol.MethodTextDocumentCodeAction, &protocol.CodeActionParams{TextDocument: protocol.TextDocumentIdentifier{URI: u},
		Range: span(t, broken, "depends_on", "extrac")}, &as)
	if len(as) != 1 || !strings.Contains(as[0].Title, `"extract"`) {
		t.Fatalf("a request during the debounce does not see the newest text: %+v", as)
	}
	c.notify(protocol.MethodTextDocumentDidSave, &protocol.DidSaveTextDocumentParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}})
	ds := c.waitVersion(u, 10)
	if !strings.Contains(strings.Join(codes(ds), ","), "missing-dependency") {
		t.Fatalf("after save: %v", codes(ds))
	}
	var versions []uint32
	for _, p := range c.publishedFor(u) {
		versions = append(versions, p.Version)
	}
	if fmt.Sprint(versions) != "[1 10]" {
		t.Fatalf("published versions %v, want [1 10]", versions)
	}
}
