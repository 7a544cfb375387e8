package lsp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/pipec/pipec/lsp"
)

// guard bounds every wait of the harness so a server that never answers
// fails the test instead of hanging it; it is a deadlock guard, not a
// timing assertion.
const guard = 60 * time.Second

// client is the editor's side of a real JSON-RPC connection to a server
// running in the same process, over an in-memory pipe.
type client struct {
	t    testing.TB
	conn jsonrpc2.Conn
	dir  string

	mu        sync.Mutex
	published []protocol.PublishDiagnosticsParams
	arrived   chan struct{}
	done      chan error
}

func start(t testing.TB, opts lsp.Options) *client {
	t.Helper()
	srv, cli := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- lsp.Serve(context.Background(), srv, opts) }()
	return connect(t, cli, done)
}

// connect is the client's side on a stream to a server, in this process or
// in a child; done reports the server's end.
func connect(t testing.TB, stream io.ReadWriteCloser, done chan error) *client {
	t.Helper()
	c := &client{t: t, dir: t.TempDir(), arrived: make(chan struct{}, 1), done: done}
	ctx := context.Background()
	c.conn = jsonrpc2.NewConn(jsonrpc2.NewStream(stream))
	c.conn.Go(ctx, func(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
		if req.Method() == protocol.MethodTextDocumentPublishDiagnostics {
			var p protocol.PublishDiagnosticsParams
			if err := json.Unmarshal(req.Params(), &p); err != nil {
				t.Errorf("publishDiagnostics: %v", err)
			}
			c.mu.Lock()
			c.published = append(c.published, p)
			c.mu.Unlock()
			select {
			case c.arrived <- struct{}{}:
			default:
			}
		}
		return reply(ctx, nil, nil)
	})
	var res protocol.InitializeResult
	c.call(protocol.MethodInitialize, &protocol.InitializeParams{}, &res)
	if res.ServerInfo == nil || res.ServerInfo.Name != "pipec" {
		t.Fatalf("initialize: serverInfo %+v", res.ServerInfo)
	}
	c.notify(protocol.MethodInitialized, &protocol.InitializedParams{})
	t.Cleanup(func() {
		c.call(protocol.MethodShutdown, nil, nil)
		_ = c.conn.Notify(context.Background(), protocol.MethodExit, nil)
		select {
		case err := <-c.done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(guard):
			t.Errorf("server did not stop after exit")
		}
		_ = c.conn.Close()
	})
	return c
}

func (c *client) call(method string, params, result any) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if _, err := c.conn.Call(ctx, method, params, result); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
}

// callErr is call for a request expected to fail.
func (c *client) callErr(method string, params, result any) error {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	_, err := c.conn.Call(ctx, method, params, result)
	return err
}

func (c *client) notify(method string, params any) {
	c.t.Helper()
	if err := c.conn.Notify(context.Background(), method, params); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
}

// uri names a file in the test's folder; the server reads the document from
// the client, never from disk.
func (c *client) uri(name string) protocol.DocumentURI {
	return protocol.DocumentURI("file://" + filepath.ToSlash(filepath.Join(c.dir, name)))
}

func (c *client) open(name, text string) protocol.DocumentURI {
	c.t.Helper()
	u := c.uri(name)
	c.notify(protocol.MethodTextDocumentDidOpen, &protocol.DidOpenTextDocumentParams{TextDocument: protocol.TextDocumentItem{
		URI: u, LanguageID: protocol.LanguageIdentifier(strings.TrimPrefix(filepath.Ext(name), ".")), Version: 1, Text: text}})
	return u
}

// contentChange is a change event with an optional range: the protocol
// package's type always sends one, which means an edit at 0:0.
type contentChange struct {
	Range *protocol.Range `json:"range,omitempty"`
	Text  string          `json:"text"`
}

type didChange struct {
	TextDocument   protocol.VersionedTextDocumentIdentifier `json:"textDocument"`
	ContentChanges []contentChange                          `json:"contentChanges"`
}

// change sends a whole new text.
func (c *client) change(u protocol.DocumentURI, version int32, text string) {
	c.t.Helper()
	c.edit(u, version, contentChange{Text: text})
}

// edit sends incremental changes.
func (c *client) edit(u protocol.DocumentURI, version int32, changes ...contentChange) {
	c.t.Helper()
	c.notify(protocol.MethodTextDocumentDidChange, &didChange{
		TextDocument:   protocol.VersionedTextDocumentIdentifier{TextDocumentIdentifier: protocol.TextDocumentIdentifier{URI: u}, Version: version},
		ContentChanges: changes})
}

// waitVersion waits for the diagnostics of a document's version and returns
// them; an older version's diagnostics arriving on the way are skipped.
func (c *client) waitVersion(u protocol.DocumentURI, version uint32) []protocol.Diagnostic {
	c.t.Helper()
	deadline := time.After(guard)
	for {
		c.mu.Lock()
		for _, p := range c.published {
			if p.URI == u && p.Version == version {
				c.mu.Unlock()
				return p.Diagnostics
			}
		}
		c.mu.Unlock()
		select {
		case <-c.arrived:
		case <-deadline:
			c.t.Fatalf("no diagnostics for %s version %d", u, version)
		}
	}
}

// publishedFor returns every publish the client got for a document, in order.
func (c *client) publishedFor(u protocol.DocumentURI) []protocol.PublishDiagnosticsParams {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []protocol.PublishDiagnosticsParams
	for _, p := range c.published {
		if p.URI == u {
			out = append(out, p)
		}
	}
	return out
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// at is the LSP position of word in src, searched after the first occurrence
// of after ("" for the start), plus shift characters into the word.
func at(t testing.TB, src, after, word string, shift int) protocol.Position {
	t.Helper()
	base := 0
	if after != "" {
		i := strings.Index(src, after)
		if i < 0 {
			t.Fatalf("%q not in source", after)
		}
		base = i + len(after)
	}
	j := strings.Index(src[base:], word)
	if j < 0 {
		t.Fatalf("%q not after %q", word, after)
	}
	off := base + j + shift
	line := strings.Count(src[:off], "\n")
	col := off - (strings.LastIndex(src[:off], "\n") + 1)
	return protocol.Position{Line: uint32(line), Character: uint32(col)}
}

// span is the range of word (as at finds it).
func span(t testing.TB, src, after, word string) protocol.Range {
	t.Helper()
	s := at(t, src, after, word, 0)
	return protocol.Range{Start: s, End: protocol.Position{Line: s.Line, Character: s.Character + uint32(len(word))}}
}

func pos(u protocol.DocumentURI, p protocol.Position) protocol.TextDocumentPositionParams {
	return protocol.TextDocumentPositionParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}, Position: p}
}

// apply applies text edits (non-overlapping, any order) to src.
func apply(t *testing.T, src string, edits []protocol.TextEdit) string {
	t.Helper()
	type abs struct {
		s, e int
		text string
	}
	offset := func(p protocol.Position) int {
		lines := strings.SplitAfter(src, "\n")
		off := 0
		for i := 0; i < int(p.Line) && i < len(lines); i++ {
			off += len(lines[i])
		}
		return off + int(p.Character)
	}
	var as []abs
	for _, e := range edits {
		as = append(as, abs{offset(e.Range.Start), offset(e.Range.End), e.NewText})
	}
	for i := 0; i < len(as); i++ {
		for j := i + 1; j < len(as); j++ {
			if as[j].s > as[i].s {
				as[i], as[j] = as[j], as[i]
			}
		}
	}
	b := []byte(src)
	for _, a := range as {
		b = append(b[:a.s:a.s], append([]byte(a.text), b[a.e:]...)...)
	}
	return string(bytes.Clone(b))
}

// pipeRW joins a child's stdout and stdin into one stream.
type pipeRW struct {
	r io.ReadCloser
	w io.WriteCloser
}

func (p pipeRW) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p pipeRW) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipeRW) Close() error {
	werr := p.w.Close()
	if err := p.r.Close(); err != nil {
		return err
	}
	return werr
}
