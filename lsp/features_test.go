package lsp_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"go.lsp.dev/protocol"

	"github.com/pipec/pipec/cli"
	"github.com/pipec/pipec/internal/specfmt"
	"github.com/pipec/pipec/lsp"
)

func hoverAt(t *testing.T, c *client, u protocol.DocumentURI, p protocol.Position) string {
	t.Helper()
	var h *protocol.Hover
	c.call(protocol.MethodTextDocumentHover, &protocol.HoverParams{TextDocumentPositionParams: pos(u, p)}, &h)
	if h == nil {
		return ""
	}
	return h.Contents.Value
}

// explainOutput is what `pipec explain RULE` prints.
func explainOutput(t *testing.T, rule string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := cli.Main([]string{"explain", rule}, cli.IO{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}); code != 0 {
		t.Fatalf("pipec explain %s: exit %d: %s", rule, code, errb.String())
	}
	return out.String()
}

func TestHover(t *testing.T) {
	for _, syn := range []string{"hcl", "cue"} {
		t.Run(syn, func(t *testing.T) {
			c := start(t, lsp.Options{})
			src := readFile(t, "testdata/refs."+syn)
			u := c.open("refs."+syn, src)

			// On a finding: the message and the text of pipec explain.
			got := hoverAt(t, c, u, at(t, src, `"raw", "`, "@-1", 1))
			if want := explainOutput(t, "interval-mismatch"); !strings.Contains(got, want) || !strings.Contains(got, "interval-mismatch") {
				t.Errorf("hover on a finding:\n%s\nwant the explain text:\n%s", got, want)
			}
			// On a reference to a policy: its values with defaults applied.
			got = hoverAt(t, c, u, at(t, src, "outputs", "gentle", 2))
			for _, want := range []string{"retry policy `gentle`", "max_attempts: 2\n", "initial: 1s (default)", "multiplier: 2 (default)", "jitter: full (default)", "on: flaky, timeout"} {
				if !strings.Contains(got, want) {
					t.Errorf("hover on a policy lacks %q:\n%s", want, got)
				}
			}
			// On a reference to a task: its command and outputs.
			got = hoverAt(t, c, u, at(t, src, "depends_on", "extract", 0))
			for _, want := range []string{"task `extract`", "command: `./extract.sh`", "outputs: raw"} {
				if !strings.Contains(got, want) {
					t.Errorf("hover on a task lacks %q:\n%s", want, got)
				}
			}
			// On an artifact: the task producing it.
			got = hoverAt(t, c, u, at(t, src, "artifact", "clean_out", 0))
			if !strings.Contains(got, "artifact `clean_out`, output of task `clean`") {
				t.Errorf("hover on an artifact:\n%s", got)
			}
			// On a sink: the fencing its type gets by default.
			got = hoverAt(t, c, u, at(t, src, pick(syn, `sink = "`, `sink: "`), "wh", 0))
			if !strings.Contains(got, "fencing: token (default for this type)") {
				t.Errorf("hover on a sink:\n%s", got)
			}
			// On a built-in class.
			if got = hoverAt(t, c, u, at(t, src, `"flaky", "`, "timeout", 0)); !strings.Contains(got, "built-in error class") {
				t.Errorf("hover on timeout:\n%s", got)
			}
			// On a field: its meaning from the schema.
			got = hoverAt(t, c, u, at(t, src, "", "row_count_min", 2))
			if !strings.Contains(got, "row_count_min: int & >=0") {
				t.Errorf("hover on row_count_min:\n%s", got)
			}
			got = hoverAt(t, c, u, at(t, src, "", "depends_on", 1))
			if !strings.Contains(got, "tasks this one waits for") {
				t.Errorf("hover on depends_on:\n%s", got)
			}
			// On an element's keyword: what the element is.
			got = hoverAt(t, c, u, at(t, src, "", "check", 2))
			if !strings.Contains(got, "#Check audits one artifact version") {
				t.Errorf("hover on the check keyword:\n%s", got)
			}
			got = hoverAt(t, c, u, at(t, src, "", "max_attempts", 1))
			if !strings.Contains(got, "counts the first attempt") || !strings.Contains(got, "Default when not written: 3.") {
				t.Errorf("hover on max_attempts:\n%s", got)
			}
		})
	}
}

func labels(l *protocol.CompletionList) []string {
	var out []string
	if l != nil {
		for _, it := range l.Items {
			out = append(out, it.Label)
		}
	}
	return out
}

func completeAt(t *testing.T, c *client, u protocol.DocumentURI, p protocol.Position) *protocol.CompletionList {
	t.Helper()
	var l *protocol.CompletionList
	c.call(protocol.MethodTextDocumentCompletion, &protocol.CompletionParams{TextDocumentPositionParams: pos(u, p)}, &l)
	return l
}

func TestCompletion(t *testing.T) {
	for _, syn := range []string{"hcl", "cue"} {
		t.Run(syn, func(t *testing.T) {
			c := start(t, lsp.Options{})
			src := readFile(t, "testdata/refs."+syn)
			u := c.open("refs."+syn, src)
			for _, tc := range []struct {
				after, word string
				shift       int
				want        string
			}{
				{"depends_on", "extract", 2, "clean,extract"},
				{"inputs", "raw", 1, "clean_out,raw"},
				{pick(syn, "on =", "on:"), "flaky", 0, "flaky,killed,timeout"},
				{pick(syn, "check", "check"), "clean_out", 3, "clean_out,raw"},
				{pick(syn, `retry = "`, `retry: "`), "gentle", 1, "gentle"},
				{pick(syn, `pool = "`, `pool: "`), "small", 1, "small"},
				{pick(syn, `sink = "`, `sink: "`), "wh", 1, "wh"},
			} {
				l := completeAt(t, c, u, at(t, src, tc.after, tc.word, tc.shift))
				if got := strings.Join(labels(l), ","); got != tc.want {
					t.Errorf("completion in %s %q = %s, want %s", tc.after, tc.word, got, tc.want)
				}
				if l != nil && len(l.Items) > 0 && l.Items[0].TextEdit.Range.Start != at(t, src, tc.after, tc.word, 0) {
					t.Errorf("completion in %s replaces from %+v", tc.after, l.Items[0].TextEdit.Range.Start)
				}
			}
			// Field names inside a task block: typing "time" at a new line.
			edited := strings.Replace(src, pick(syn, "    pool = \"small\"\n", "\t\tpool: \"small\"\n"), pick(syn, "    pool = \"small\"\n    time\n", "\t\tpool: \"small\"\n\t\ttime\n"), 1)
			c.change(u, 2, edited)
			l := completeAt(t, c, u, at(t, edited, "small\"\n", "time", 4))
			got := labels(l)
			for _, want := range []string{"timeout", "depends_on", "heartbeat"} {
				if !slices.Contains(got, want) {
					t.Errorf("task fields %v lack %s", got, want)
				}
			}
			if slices.Contains(got, "row_count_min") {
				t.Errorf("task fields offer a check's field: %v", got)
			}
			if slices.Contains(got, "pool") || slices.Contains(got, "outputs") || slices.Contains(got, "command") {
				t.Errorf("task fields offer fields the block already has: %v", got)
			}
			// Inside a check: the check's fields.
			l = completeAt(t, c, u, at(t, edited, "", "row_count_min", 3))
			if got := labels(l); !slices.Contains(got, "row_count_max") || !slices.Contains(got, "command") || slices.Contains(got, "input") {
				t.Errorf("check fields = %v", got)
			}
		})
	}
}

func actionsAt(t *testing.T, c *client, u protocol.DocumentURI, r protocol.Range) []protocol.CodeAction {
	t.Helper()
	var as []protocol.CodeAction
	c.call(protocol.MethodTextDocumentCodeAction, &protocol.CodeActionParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}, Range: r}, &as)
	return as
}

// The did-you-mean fix replaces a misspelt dependency or artifact; applying
// it makes the finding disappear.
func TestCodeActionDidYouMean(t *testing.T) {
	for _, syn := range []string{"hcl", "cue"} {
		for _, tc := range []struct{ from, to, rule string }{
			{`["extract"]`, `["extrac"]`, "missing-dependency"},
			{`"raw",`, `"rwa",`, "missing-artifact"},
		} {
			t.Run(syn+"/"+tc.rule, func(t *testing.T) {
				c := start(t, lsp.Options{})
				src := strings.Replace(readFile(t, "testdata/refs."+syn), tc.from, tc.to, 1)
				u := c.open("refs."+syn, src)
				ds := c.waitVersion(u, 1)
				var d *protocol.Diagnostic
				for i := range ds {
					if ds[i].Code == tc.rule {
						d = &ds[i]
					}
				}
				if d == nil {
					t.Fatalf("no %s finding: %v", tc.rule, codes(ds))
				}
				as := actionsAt(t, c, u, d.Range)
				if len(as) != 1 || as[0].Kind != protocol.QuickFix || !as[0].IsPreferred || len(as[0].Diagnostics) != 1 || as[0].Diagnostics[0].Code != tc.rule {
					t.Fatalf("actions = %+v", as)
				}
				fixed := apply(t, src, as[0].Edit.Changes[u])
				if !strings.Contains(fixed, tc.from) {
					t.Fatalf("fix %q did not restore %s:\n%s", as[0].Title, tc.from, fixed)
				}
				c.change(u, 2, fixed)
				for _, d := range c.waitVersion(u, 2) {
					if d.Code == tc.rule {
						t.Fatalf("after the fix: %v", d.Message)
					}
				}
			})
		}
	}
}

// The ignore action adds a pipec:ignore comment above the finding; the
// finding is then suppressed and the comment counts as used.
func TestCodeActionIgnore(t *testing.T) {
	for _, syn := range []string{"hcl", "cue"} {
		t.Run(syn, func(t *testing.T) {
			c := start(t, lsp.Options{})
			src := readFile(t, "testdata/refs."+syn)
			u := c.open("refs."+syn, src)
			ds := c.waitVersion(u, 1)
			var as []protocol.CodeAction
			for _, d := range ds {
				if d.Code == "heartbeat-lease" {
					as = actionsAt(t, c, u, d.Range)
				}
			}
			if len(as) != 1 || !strings.Contains(as[0].Title, "heartbeat-lease") {
				t.Fatalf("actions = %+v", as)
			}
			out := apply(t, src, as[0].Edit.Changes[u])
			marker := pick(syn, "    # pipec:ignore heartbeat-lease ", "\t\t// pipec:ignore heartbeat-lease ")
			if !strings.Contains(out, marker) {
				t.Fatalf("edited text lacks %q:\n%s", marker, out)
			}
			c.change(u, 2, out)
			if got := strings.Join(codes(c.waitVersion(u, 2)), ","); got != "interval-mismatch" {
				t.Fatalf("after ignoring: %s", got)
			}
		})
	}
}

// Compiler findings cannot be suppressed, so they get no ignore action.
func TestNoIgnoreActionForCompilerFindings(t *testing.T) {
	c := start(t, lsp.Options{})
	src := strings.Replace(readFile(t, "testdata/refs.hcl"), `["extract"]`, `["zzz"]`, 1)
	u := c.open("refs.hcl", src)
	for _, d := range c.waitVersion(u, 1) {
		if d.Code == "missing-dependency" {
			if as := actionsAt(t, c, u, d.Range); len(as) != 0 {
				t.Fatalf("actions for an unsuppressible finding with no close name: %+v", as)
			}
			return
		}
	}
	t.Fatal("no missing-dependency finding")
}

// Formatting gives exactly pipec fmt's output, and nothing for a formatted
// or unparsable file.
func TestFormatting(t *testing.T) {
	for _, name := range []string{"refs.hcl", "refs.cue"} {
		t.Run(name, func(t *testing.T) {
			c := start(t, lsp.Options{})
			src := readFile(t, "testdata/"+name)
			u := c.open(name, src)
			var edits []protocol.TextEdit
			c.call(protocol.MethodTextDocumentFormatting, &protocol.DocumentFormattingParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}}, &edits)
			want, ds := specfmt.Source(name, []byte(src))
			if len(ds) != 0 || string(want) == src {
				t.Fatalf("testdata/%s is expected to be parsable and unformatted", name)
			}
			if got := apply(t, src, edits); got != string(want) {
				t.Fatalf("formatted:\n%s\nwant:\n%s", got, want)
			}
			c.change(u, 2, string(want))
			c.call(protocol.MethodTextDocumentFormatting, &protocol.DocumentFormattingParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}}, &edits)
			if len(edits) != 0 {
				t.Fatalf("edits for a formatted file: %+v", edits)
			}
			c.change(u, 3, "pipeline \"p\" {\n")
			c.call(protocol.MethodTextDocumentFormatting, &protocol.DocumentFormattingParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}}, &edits)
			if len(edits) != 0 {
				t.Fatalf("edits for a file that does not parse: %+v", edits)
			}
		})
	}
}
