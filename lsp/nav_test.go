package lsp_test

import (
	"strings"
	"testing"

	"go.lsp.dev/protocol"

	"github.com/pipec/pipec/lsp"
)

// navCase is a reference and its definition: word after refAfter goes to
// word after defAfter.
type navCase struct {
	name              string
	refAfter, word    string
	defAfter, defWord string
}

// refCases covers every kind of name a spec refers to. The after strings
// are written for both syntaxes where they differ (HCL first, CUE second).
func refCases(syn string) []navCase {
	hcl := syn == "hcl"
	pick := func(h, c string) string {
		if hcl {
			return h
		}
		return c
	}
	return []navCase{
		{name: "depends_on", refAfter: "depends_on", word: "extract", defAfter: pick(`task "`, "task: "), defWord: "extract"},
		{name: "inputs", refAfter: "inputs", word: "raw", defAfter: "outputs", defWord: "raw"},
		{name: "inputs offset", refAfter: `"raw", "`, word: "clean_out", defAfter: `"clean_out@-1"]`, defWord: "clean_out"},
		{name: "check input", refAfter: pick("input =", "input:"), word: "clean_out", defAfter: `"clean_out@-1"]`, defWord: "clean_out"},
		{name: "publish artifact", refAfter: "artifact", word: "clean_out", defAfter: `"clean_out@-1"]`, defWord: "clean_out"},
		{name: "publish sink", refAfter: pick(`artifact = "clean_out"`, `artifact: "clean_out"`), word: "wh", defAfter: pick(`sink "`, "sink: "), defWord: "wh"},
		{name: "task retry", refAfter: `outputs`, word: "gentle", defAfter: pick(`retry "`, "retry: "), defWord: "gentle"},
		{name: "task pool", refAfter: pick(`retry = "gentle"`, `retry: "gentle"`), word: "small", defAfter: pick(`pool "`, "pool: "), defWord: "small"},
		{name: "policy on", refAfter: pick("on =", "on:"), word: "flaky", defAfter: pick(`error "`, "error: "), defWord: "flaky"},
	}
}

func TestDefinition(t *testing.T) {
	for _, syn := range []string{"hcl", "cue"} {
		c := start(t, lsp.Options{})
		src := readFile(t, "testdata/refs."+syn)
		u := c.open("refs."+syn, src)
		for _, tc := range refCases(syn) {
			t.Run(syn+"/"+tc.name, func(t *testing.T) {
				for _, shift := range []int{0, len(tc.word)} { // at the start and just after the name
					var locs []protocol.Location
					c.call(protocol.MethodTextDocumentDefinition, &protocol.DefinitionParams{
						TextDocumentPositionParams: pos(u, at(t, src, tc.refAfter, tc.word, shift))}, &locs)
					want := span(t, src, tc.defAfter, tc.defWord)
					if len(locs) != 1 || locs[0].URI != u || locs[0].Range != want {
						t.Fatalf("definition = %+v, want %+v", locs, want)
					}
				}
			})
		}
		// A built-in class and a plain value have no definition.
		var locs []protocol.Location
		c.call(protocol.MethodTextDocumentDefinition, &protocol.DefinitionParams{
			TextDocumentPositionParams: pos(u, at(t, src, `"flaky", "`, "timeout", 1))}, &locs)
		if len(locs) != 0 {
			t.Errorf("%s: definition of a built-in class = %+v", syn, locs)
		}
	}
}

func TestReferences(t *testing.T) {
	for _, syn := range []string{"hcl", "cue"} {
		t.Run(syn, func(t *testing.T) {
			c := start(t, lsp.Options{})
			src := readFile(t, "testdata/refs."+syn)
			u := c.open("refs."+syn, src)
			var locs []protocol.Location
			c.call(protocol.MethodTextDocumentReferences, &protocol.ReferenceParams{
				TextDocumentPositionParams: pos(u, at(t, src, "artifact", "clean_out", 2)),
				Context:                    protocol.ReferenceContext{IncludeDeclaration: true}}, &locs)
			want := []protocol.Range{
				span(t, src, `"clean_out@-1"]`, "clean_out"), // the output defining it
				span(t, src, `"raw", "`, "clean_out"),        // clean's own input of the previous interval
				span(t, src, "check", "clean_out"),
				span(t, src, "artifact", "clean_out"),
			}
			if len(locs) != len(want) {
				t.Fatalf("references = %+v", locs)
			}
			for i := range want {
				if locs[i].Range != want[i] {
					t.Errorf("reference %d = %+v, want %+v", i, locs[i].Range, want[i])
				}
			}
			c.call(protocol.MethodTextDocumentReferences, &protocol.ReferenceParams{
				TextDocumentPositionParams: pos(u, at(t, src, "depends_on", "extract", 0)),
				Context:                    protocol.ReferenceContext{IncludeDeclaration: false}}, &locs)
			if len(locs) != 1 || locs[0].Range != span(t, src, "depends_on", "extract") {
				t.Fatalf("references without declaration = %+v", locs)
			}
		})
	}
}

// Rename changes a name's definition and every reference, and the renamed
// spec lints as cleanly as before.
func TestRename(t *testing.T) {
	for _, syn := range []string{"hcl", "cue"} {
		for _, tc := range []struct{ after, word, to string }{
			{"depends_on", "extract", "fetch-orders"},
			{"artifact", "clean_out", "orders"},
			{"on", "flaky", "transient"},
			{pick(syn, `sink = "`, `sink: "`), "wh", "warehouse"},
		} {
			t.Run(syn+"/"+tc.word, func(t *testing.T) {
				c := start(t, lsp.Options{})
				src := readFile(t, "testdata/refs."+syn)
				u := c.open("refs."+syn, src)
				before := codes(c.waitVersion(u, 1))
				var r *protocol.Range
				c.call(protocol.MethodTextDocumentPrepareRename, &protocol.PrepareRenameParams{TextDocumentPositionParams: pos(u, at(t, src, tc.after, tc.word, 1))}, &r)
				if r == nil || *r != span(t, src, tc.after, tc.word) {
					t.Fatalf("prepareRename = %+v", r)
				}
				var we protocol.WorkspaceEdit
				c.call(protocol.MethodTextDocumentRename, &protocol.RenameParams{TextDocumentPositionParams: pos(u, at(t, src, tc.after, tc.word, 1)), NewName: tc.to}, &we)
				out := apply(t, src, we.Changes[u])
				if strings.Count(out, tc.to) < 2 || strings.Contains(out, `"`+tc.word+`"`) {
					t.Fatalf("renamed text:\n%s", out)
				}
				c.change(u, 2, out)
				if after := codes(c.waitVersion(u, 2)); strings.Join(after, ",") != strings.Join(before, ",") {
					t.Fatalf("findings before %v, after the rename %v:\n%s", before, after, out)
				}
			})
		}
	}
	c := start(t, lsp.Options{})
	src := readFile(t, "testdata/refs.hcl")
	u := c.open("refs.hcl", src)
	var we *protocol.WorkspaceEdit
	if err := c.callErr(protocol.MethodTextDocumentRename, &protocol.RenameParams{TextDocumentPositionParams: pos(u, at(t, src, "depends_on", "extract", 1)), NewName: "no spaces"}, &we); err == nil || !strings.Contains(err.Error(), "invalid task name") {
		t.Fatalf("rename to an invalid name: %v", err)
	}
}

func pick(syn, hcl, cue string) string {
	if syn == "hcl" {
		return hcl
	}
	return cue
}

func TestDocumentSymbols(t *testing.T) {
	for _, syn := range []string{"hcl", "cue"} {
		t.Run(syn, func(t *testing.T) {
			c := start(t, lsp.Options{})
			src := readFile(t, "testdata/refs."+syn)
			u := c.open("refs."+syn, src)
			var syms []protocol.DocumentSymbol
			c.call(protocol.MethodTextDocumentDocumentSymbol, &protocol.DocumentSymbolParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}}, &syms)
			if len(syms) != 1 || syms[0].Name != "p" {
				t.Fatalf("symbols = %+v", syms)
			}
			var got []string
			for _, s := range syms[0].Children {
				got = append(got, s.Detail+" "+s.Name)
				if !contains(s.Range, s.SelectionRange) || !contains(syms[0].Range, s.Range) {
					t.Errorf("%s: range %+v does not hold selection %+v or is outside the pipeline", s.Name, s.Range, s.SelectionRange)
				}
			}
			want := "pool small,error class flaky,retry policy gentle,task extract,task clean,check ok,sink wh,publish mart"
			if strings.Join(got, ",") != want {
				t.Fatalf("outline = %s", strings.Join(got, ","))
			}
			if r := syms[0].Children[3].SelectionRange; r != span(t, src, pick(syn, `task "`, "task: "), "extract") {
				t.Errorf("task selection range = %+v", r)
			}
		})
	}
}

func contains(outer, inner protocol.Range) bool {
	le := func(a, b protocol.Position) bool {
		return a.Line < b.Line || a.Line == b.Line && a.Character <= b.Character
	}
	return le(outer.Start, inner.Start) && le(inner.End, outer.End)
}
