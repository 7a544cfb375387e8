package lsp_test

import (
	"encoding/json"
	"strings"
	"testing"

	"go.lsp.dev/protocol"

	"github.com/pipec/pipec/lsp"
)

// Requests about positions past the end, documents never opened, files
// that are not specs, and parameters of the wrong shape get an answer (an
// empty one or an error reply), and the server keeps serving.
func TestHostileRequests(t *testing.T) {
	c := start(t, lsp.Options{})
	src := readFile(t, "testdata/refs.cue")
	u := c.open("refs.cue", src)
	c.waitVersion(u, 1)
	far := protocol.Position{Line: 1 << 30, Character: 1 << 30}
	mid := protocol.Position{Line: 3, Character: 1 << 20}
	for _, doc := range []protocol.DocumentURI{u, c.uri("never-opened.hcl"), "untitled:Untitled-1", "file:///%zz"} {
		for _, p := range []protocol.Position{far, mid, {}} {
			tp := pos(doc, p)
			var any json.RawMessage
			c.call(protocol.MethodTextDocumentDefinition, &protocol.DefinitionParams{TextDocumentPositionParams: tp}, &any)
			c.call(protocol.MethodTextDocumentReferences, &protocol.ReferenceParams{TextDocumentPositionParams: tp}, &any)
			c.call(protocol.MethodTextDocumentHover, &protocol.HoverParams{TextDocumentPositionParams: tp}, &any)
			c.call(protocol.MethodTextDocumentCompletion, &protocol.CompletionParams{TextDocumentPositionParams: tp}, &any)
			c.call(protocol.MethodTextDocumentPrepareRename, &protocol.PrepareRenameParams{TextDocumentPositionParams: tp}, &any)
			c.call(protocol.MethodTextDocumentCodeAction, &protocol.CodeActionParams{TextDocument: tp.TextDocument, Range: protocol.Range{Start: p, End: far}}, &any)
			c.call(protocol.MethodTextDocumentDocumentSymbol, &protocol.DocumentSymbolParams{TextDocument: tp.TextDocument}, &any)
			c.call(protocol.MethodTextDocumentFormatting, &protocol.DocumentFormattingParams{TextDocument: tp.TextDocument}, &any)
		}
	}
	var any json.RawMessage
	if err := c.callErr(protocol.MethodTextDocumentHover, json.RawMessage(`{"textDocument": 7}`), &any); err == nil {
		t.Errorf("hover with malformed params: no error")
	}
	if err := c.callErr("pipec/unknown", nil, &any); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("unknown method: %v", err)
	}
	// Edits with ranges past the end and reversed, and a malformed change,
	// leave a document the server still lints.
	c.notify(protocol.MethodTextDocumentDidChange, json.RawMessage(`{"textDocument": {"uri": 3}}`))
	c.edit(u, 2,
		contentChange{Range: &protocol.Range{Start: far, End: far}, Text: "\n// tail\n"},
		contentChange{Range: &protocol.Range{Start: protocol.Position{Line: 2}, End: protocol.Position{Line: 1}}, Text: ""},
	)
	c.waitVersion(u, 2)
	// Binary garbage as a spec.
	g := c.open("garbage.hcl", "pipeline \"x\" {\x00\xff\xfe ${${ \"\n")
	var syms json.RawMessage
	c.call(protocol.MethodTextDocumentDocumentSymbol, &protocol.DocumentSymbolParams{TextDocument: protocol.TextDocumentIdentifier{URI: g}}, &syms)
	// A spec with invalid bytes after a valid header is still reported.
	b := c.open("broken.hcl", "pipeline \"x\" {\n  task \"a\" { command = [\"\xff\"] ${${\n")
	if ds := c.waitVersion(b, 1); len(ds) == 0 {
		t.Fatalf("no findings for a broken spec")
	}
}
