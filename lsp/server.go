// Package lsp is pipec's language server: `pipec lsp` speaks the Language
// Server Protocol over standard input and output, so an editor shows every
// `pipec lint` finding while the author types, and navigates, completes,
// renames and formats the names of a spec in HCL and in CUE.
//
// The wire is go.lsp.dev/jsonrpc2 with the types of go.lsp.dev/protocol: the
// jsonrpc2 stream works on any io.ReadWriteCloser (stdio in production, an
// in-process pipe in tests), the protocol package has both the server's and
// the client's side of every message (tests drive the server through the
// typed client), and neither keeps global state.
//
// Each open document has a generation, bumped on every change. Analysis runs
// off the connection's read loop, one at a time per document, always on the
// newest text; a result is published only if its generation is still the
// newest when it is done, under the document's lock, so a stale result can
// never be published after a newer one.
package lsp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/pipec/pipec/config"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/spec"
	"github.com/pipec/pipec/spec/cuespec"
)

// DefaultDebounce is how long the server waits after a change before it
// lints, so a burst of keystrokes is linted once. It is short because a
// typical spec lints in a few milliseconds: the wait is for coalescing, not
// for saving work.
const DefaultDebounce = 5 * time.Millisecond

// Options configure a server.
type Options struct {
	// Disable turns rules off on top of each file's configuration (the
	// command line's --disable).
	Disable []string
	// Workers, when positive, replaces the configuration's worker count (the
	// command line's --workers).
	Workers int
	// Config names the configuration file for every document; "" means the
	// .pipec.yaml found from the document's folder upwards (stopping at the
	// repository's root), as pipec lint finds it from its working folder.
	Config string
	// Debounce is the quiet time after a change before linting; 0 means
	// DefaultDebounce, a negative value none.
	Debounce time.Duration
	// Version is reported to the client in serverInfo.
	Version string
}

// Server is one language server connection.
type Server struct {
	opts Options
	conn jsonrpc2.Conn

	mu     sync.Mutex
	docs   map[protocol.DocumentURI]*document
	exited bool

	schemaOnce sync.Once
	schema     *schemaDocs

	// chunks: every edit loads the whole document again, and CUE
	// evaluates only the chunks of a big plain spec whose content changed.
	chunks *cuespec.ChunkCache

	cfgMu sync.Mutex
	// cfgShown holds the configuration files whose findings were last
	// published non-empty, so a fixed file gets its findings cleared.
	cfgShown map[string]bool
}

// Serve runs a server on rwc until the client sends exit or the stream ends.
func Serve(ctx context.Context, rwc io.ReadWriteCloser, opts Options) error {
	if opts.Debounce == 0 {
		opts.Debounce = DefaultDebounce
	}
	s := &Server{opts: opts, docs: map[protocol.DocumentURI]*document{}, cfgShown: map[string]bool{},
		chunks: cuespec.NewChunkCache()}
	s.conn = jsonrpc2.NewConn(jsonrpc2.NewStream(rwc))
	s.conn.Go(ctx, s.handle)
	select {
	case <-s.conn.Done():
	case <-ctx.Done():
		_ = s.conn.Close()
		<-s.conn.Done()
	}
	s.mu.Lock()
	exited := s.exited
	for _, d := range s.docs {
		d.close()
	}
	s.mu.Unlock()
	if err := s.conn.Err(); err != nil && !exited && !errors.Is(err, io.EOF) && ctx.Err() == nil {
		return err
	}
	return nil
}

// handle dispatches one message. It never returns an error for a bad
// request (that would end the connection): the client gets an error reply,
// and a panic on hostile input becomes an internal error.
func (s *Server) handle(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = reply(ctx, nil, jsonrpc2.NewError(jsonrpc2.InternalError, fmt.Sprintf("%s: %v", req.Method(), v)))
		}
	}()
	switch req.Method() {
	case protocol.MethodInitialize:
		return call(ctx, reply, req, s.initialize)
	case protocol.MethodInitialized, protocol.MethodWorkspaceDidChangeConfiguration, protocol.MethodTextDocumentWillSave:
		return reply(ctx, nil, nil)
	case protocol.MethodShutdown:
		return reply(ctx, nil, nil)
	case protocol.MethodExit:
		s.mu.Lock()
		s.exited = true
		s.mu.Unlock()
		_ = reply(ctx, nil, nil)
		return s.conn.Close()
	case protocol.MethodTextDocumentDidOpen:
		return notify(ctx, reply, req, s.didOpen)
	case protocol.MethodTextDocumentDidChange:
		return notify(ctx, reply, req, s.didChange)
	case protocol.MethodTextDocumentDidSave:
		return notify(ctx, reply, req, s.didSave)
	case protocol.MethodTextDocumentDidClose:
		return notify(ctx, reply, req, s.didClose)
	case protocol.MethodTextDocumentDefinition:
		return call(ctx, reply, req, s.definition)
	case protocol.MethodTextDocumentReferences:
		return call(ctx, reply, req, s.references)
	case protocol.MethodTextDocumentPrepareRename:
		return call(ctx, reply, req, s.prepareRename)
	case protocol.MethodTextDocumentRename:
		return call(ctx, reply, req, s.rename)
	case protocol.MethodTextDocumentDocumentSymbol:
		return call(ctx, reply, req, s.documentSymbol)
	case protocol.MethodTextDocumentHover:
		return call(ctx, reply, req, s.hover)
	case protocol.MethodTextDocumentCompletion:
		return call(ctx, reply, req, s.completion)
	case protocol.MethodTextDocumentCodeAction:
		return call(ctx, reply, req, s.codeAction)
	case protocol.MethodTextDocumentFormatting:
		return call(ctx, reply, req, s.formatting)
	}
	if _, ok := req.(*jsonrpc2.Call); !ok {
		return nil // an unknown notification ($/setTrace, $/cancelRequest) needs no answer
	}
	return jsonrpc2.MethodNotFoundHandler(ctx, reply, req)
}

// call decodes a request's parameters, runs f and replies with its result.
func call[P, R any](ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request, f func(*P) (R, error)) error {
	var p P
	if len(req.Params()) > 0 {
		if err := json.Unmarshal(req.Params(), &p); err != nil {
			return reply(ctx, nil, jsonrpc2.NewError(jsonrpc2.InvalidParams, fmt.Sprintf("%s: %v", req.Method(), err)))
		}
	}
	r, err := f(&p)
	if err != nil {
		return reply(ctx, nil, err)
	}
	return reply(ctx, r, nil)
}

// notify decodes a notification's parameters and runs f.
func notify[P any](ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request, f func(*P)) error {
	var p P
	if err := json.Unmarshal(req.Params(), &p); err != nil {
		return reply(ctx, nil, nil) // a notification has no reply to carry the error
	}
	f(&p)
	return reply(ctx, nil, nil)
}

func (s *Server) initialize(*protocol.InitializeParams) (*protocol.InitializeResult, error) {
	return &protocol.InitializeResult{
		Capabilities: protocol.ServerCapabilities{
			TextDocumentSync: protocol.TextDocumentSyncOptions{
				OpenClose: true,
				// Incremental: a keystroke in a 10,000-task spec sends a
				// few bytes, not the megabyte of the whole text.
				Change: protocol.TextDocumentSyncKindIncremental,
				Save:   &protocol.SaveOptions{IncludeText: true},
			},
			HoverProvider:              true,
			DefinitionProvider:         true,
			ReferencesProvider:         true,
			DocumentSymbolProvider:     true,
			RenameProvider:             &protocol.RenameOptions{PrepareProvider: true},
			CompletionProvider:         &protocol.CompletionOptions{TriggerCharacters: []string{`"`, "["}},
			CodeActionProvider:         &protocol.CodeActionOptions{CodeActionKinds: []protocol.CodeActionKind{protocol.QuickFix}},
			DocumentFormattingProvider: true,
		},
		ServerInfo: &protocol.ServerInfo{Name: "pipec", Version: s.opts.Version},
	}, nil
}

// uriPath turns a document URI into a file path. Only the path matters (to
// pick the syntax, to find the configuration, to match pipec:ignore
// comments); a URI that is not a file gives its path as is.
func uriPath(u protocol.DocumentURI) string {
	parsed, err := url.Parse(string(u))
	if err != nil || parsed.Path == "" {
		return string(u)
	}
	return filepath.FromSlash(parsed.Path)
}

// settings returns the configuration and lint options for a spec file:
// the configuration's, with the server's flags on top, as pipec lint
// combines them. The configuration's own findings are published on its
// file; its valid parts still apply, as the config package promises.
func (s *Server) settings(path string) (lint.Options, *config.Config) {
	var cfg *config.Config
	var ds diag.Diagnostics
	var err error
	if s.opts.Config != "" {
		cfg, ds, err = config.Load(s.opts.Config)
	} else {
		cfg, ds, err = config.Find(filepath.Dir(path))
	}
	if err != nil || cfg == nil {
		cfg = &config.Config{}
	}
	s.publishConfig(cfg.File, ds)
	opts := cfg.Options()
	opts.Disable = append(opts.Disable, s.opts.Disable...)
	if s.opts.Workers > 0 {
		// Another pool: the file's labels described its own workers.
		opts.Workers, opts.WorkerLabels = s.opts.Workers, nil
	}
	if lint.CheckOptions(opts) != nil {
		// A rule name the configuration got wrong is among its findings;
		// lint with the server's own flags rather than not at all.
		opts = lint.Options{Disable: s.opts.Disable, Workers: s.opts.Workers}
	}
	return opts, cfg
}

// publishConfig shows a configuration file's findings on that file, and
// clears them once it has none.
func (s *Server) publishConfig(file string, ds diag.Diagnostics) {
	if file == "" {
		return
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return
	}
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	if len(ds) == 0 && !s.cfgShown[abs] {
		return
	}
	s.cfgShown[abs] = len(ds) > 0
	src, _ := os.ReadFile(abs)
	a := &analysis{lines: newLines(src), diags: ds}
	_ = s.conn.Notify(context.Background(), protocol.MethodTextDocumentPublishDiagnostics, a.publishParams(fileURI(abs)))
}

// fileURI is the file: URI of an absolute path.
func fileURI(abs string) protocol.DocumentURI {
	return protocol.DocumentURI((&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String())
}

func (s *Server) didOpen(p *protocol.DidOpenTextDocumentParams) {
	path := uriPath(p.TextDocument.URI)
	syn, ok := spec.SyntaxOf(path)
	if !ok {
		return
	}
	d := &document{s: s, uri: p.TextDocument.URI, path: path, syn: syn}
	s.mu.Lock()
	if old := s.docs[d.uri]; old != nil {
		old.close()
	}
	s.docs[d.uri] = d
	s.mu.Unlock()
	d.update([]byte(p.TextDocument.Text), p.TextDocument.Version, 0)
}

// changeEvent is a content change. Its range is a pointer, unlike in the
// protocol package, to tell a whole new text (no range) from an edit at the
// start of the document.
type changeEvent struct {
	Range *protocol.Range `json:"range,omitempty"`
	Text  string          `json:"text"`
}

type didChangeParams struct {
	TextDocument   protocol.VersionedTextDocumentIdentifier `json:"textDocument"`
	ContentChanges []changeEvent                            `json:"contentChanges"`
}

func (s *Server) didChange(p *didChangeParams) {
	d := s.doc(p.TextDocument.URI)
	if d == nil || len(p.ContentChanges) == 0 {
		return
	}
	d.edit(p.ContentChanges, p.TextDocument.Version, s.opts.Debounce)
}

func (s *Server) didSave(p *protocol.DidSaveTextDocumentParams) {
	if filepath.Base(uriPath(p.TextDocument.URI)) == config.FileName {
		// The configuration changed: every open spec may lint differently.
		s.mu.Lock()
		docs := make([]*document, 0, len(s.docs))
		for _, d := range s.docs {
			docs = append(docs, d)
		}
		s.mu.Unlock()
		for _, d := range docs {
			d.relint("")
		}
		return
	}
	d := s.doc(p.TextDocument.URI)
	if d == nil {
		return
	}
	// Saving may have changed the configuration's view or the text (a
	// client that formats on save): lint again, at once.
	d.relint(p.Text)
}

func (s *Server) didClose(p *protocol.DidCloseTextDocumentParams) {
	s.mu.Lock()
	d := s.docs[p.TextDocument.URI]
	delete(s.docs, p.TextDocument.URI)
	s.mu.Unlock()
	if d != nil {
		d.close()
		_ = s.conn.Notify(context.Background(), protocol.MethodTextDocumentPublishDiagnostics,
			&protocol.PublishDiagnosticsParams{URI: d.uri, Diagnostics: []protocol.Diagnostic{}})
	}
}

func (s *Server) doc(u protocol.DocumentURI) *document {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.docs[u]
}

// current returns the analysis of a document's newest text, or nil for a
// document the server does not hold.
func (s *Server) current(u protocol.DocumentURI) *analysis {
	d := s.doc(u)
	if d == nil {
		return nil
	}
	return d.current()
}
