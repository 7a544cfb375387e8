package lsp

import (
	"context"
	"sync"
	"time"

	"go.lsp.dev/protocol"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/spec"
)

// document is one open file. Its fields after mu change under mu; an
// analysis, once built, never changes.
type document struct {
	s    *Server
	uri  protocol.DocumentURI
	path string
	syn  spec.Syntax

	mu      sync.Mutex
	text    []byte
	version int32
	gen     uint64    // bumped on every change of text or of what lint sees
	latest  *analysis // the newest analysis built, possibly of an older generation
	timer   *time.Timer
	running bool // a worker is analysing
	// inflight is the analysis being built, which a request for the same
	// generation waits for instead of building it a second time.
	inflight *pending
	sent     uint64 // the generation last published
	shown    bool   // the last publish had findings
	closed   bool
}

// update takes a new text and schedules its analysis after delay. A change
// that comes while a worker is busy is picked up by that worker when it is
// done, so analyses never pile up behind fast typing.
func (d *document) update(text []byte, version int32, delay time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.text, d.version = text, version
	d.gen++
	d.scheduleLocked(delay)
}

// edit applies content changes in order (each range is in the text as the
// changes before it left it) and schedules the analysis like update.
func (d *document) edit(changes []changeEvent, version int32, delay time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	text := d.text
	for _, c := range changes {
		text = applyChange(text, c)
	}
	d.text, d.version = text, version
	d.gen++
	d.scheduleLocked(delay)
}

// applyChange returns a new text (analyses keep the old one) with one change
// applied; positions past the end clamp to it, as the protocol asks.
func applyChange(text []byte, c changeEvent) []byte {
	if c.Range == nil {
		return []byte(c.Text)
	}
	l := newLines(text)
	s, e := l.offset(c.Range.Start), l.offset(c.Range.End)
	if e < s {
		s, e = e, s
	}
	out := make([]byte, 0, len(text)-(e-s)+len(c.Text))
	out = append(out, text[:s]...)
	out = append(out, c.Text...)
	return append(out, text[e:]...)
}

// relint analyses the document again (after a save), with the saved text
// when the client sent it.
func (d *document) relint(text string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if text != "" {
		d.text = []byte(text)
	}
	d.gen++
	d.scheduleLocked(0)
}

func (d *document) scheduleLocked(delay time.Duration) {
	if d.closed || d.running {
		return
	}
	if delay <= 0 {
		if d.timer != nil {
			d.timer.Stop()
			d.timer = nil
		}
		d.running = true
		go d.work()
		return
	}
	if d.timer != nil {
		d.timer.Reset(delay)
		return
	}
	d.timer = time.AfterFunc(delay, func() {
		d.mu.Lock()
		if d.closed || d.running {
			d.mu.Unlock()
			return
		}
		d.timer = nil
		d.running = true
		d.mu.Unlock()
		d.work()
	})
}

// work analyses the newest text until the result it has is still the
// newest, then publishes it.
func (d *document) work() {
	for {
		d.mu.Lock()
		if d.closed {
			d.running = false
			d.mu.Unlock()
			return
		}
		gen, text, version := d.gen, d.text, d.version
		d.mu.Unlock()
		a := d.analysisOf(gen, text, version)
		d.mu.Lock()
		if d.closed || a.gen != d.gen {
			d.mu.Unlock()
			continue
		}
		d.running = false
		// A file that is not a spec gets nothing, not even an empty list,
		// unless it had findings to clear (it was a spec a moment ago).
		if a.gen > d.sent && (a.pipeline || d.shown) {
			d.sent = a.gen
			d.shown = len(a.diags) > 0
			// Published under the lock: a newer generation's publish waits
			// for this one, so the client sees results in order.
			_ = d.s.conn.Notify(context.Background(), protocol.MethodTextDocumentPublishDiagnostics, a.publishParams(d.uri))
		}
		d.mu.Unlock()
		return
	}
}

// build analyses one text. A panic in a loader, the compiler or a rule (a
// bug met on some input) must not take the editor's server down: it becomes
// one finding at the top of the file, and the next edit tries again.
func (d *document) build(gen uint64, text []byte, version int32) (a *analysis) {
	defer func() {
		if v := recover(); v != nil {
			a = &analysis{path: d.path, syn: d.syn, src: text, lines: newLines(text), pipeline: true,
				diags: diag.Diagnostics{diag.Errorf("internal", diag.Range{Filename: d.path, Start: diag.Pos{Line: 1, Column: 1}, End: diag.Pos{Line: 1, Column: 1}},
					"pipec failed on this text (please report it): %v", v)}}
		}
		a.gen, a.version, a.uri = gen, version, d.uri
	}()
	opts, cfg := d.s.settings(d.path)
	return analyze(d.path, d.syn, text, opts, cfg, d.s.chunks)
}

func (d *document) keepLocked(a *analysis) {
	if d.latest == nil || a.gen > d.latest.gen {
		d.latest = a
	}
}

// pending is an analysis under construction.
type pending struct {
	gen  uint64
	done chan struct{}
	a    *analysis
}

// analysisOf returns the analysis of one generation: the one kept, the one
// being built (waited for), or a new one.
func (d *document) analysisOf(gen uint64, text []byte, version int32) *analysis {
	d.mu.Lock()
	if d.latest != nil && d.latest.gen == gen {
		a := d.latest
		d.mu.Unlock()
		return a
	}
	if p := d.inflight; p != nil && p.gen == gen {
		d.mu.Unlock()
		<-p.done
		return p.a
	}
	p := &pending{gen: gen, done: make(chan struct{})}
	d.inflight = p
	d.mu.Unlock()
	p.a = d.build(gen, text, version)
	d.mu.Lock()
	d.keepLocked(p.a)
	if d.inflight == p {
		d.inflight = nil
	}
	d.mu.Unlock()
	close(p.done)
	return p.a
}

// current returns the analysis of the newest text, building it now when the
// worker has not yet: a request must answer about what the author sees.
func (d *document) current() *analysis {
	d.mu.Lock()
	gen, text, version := d.gen, d.text, d.version
	d.mu.Unlock()
	return d.analysisOf(gen, text, version)
}

func (d *document) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
}

// publishParams converts the findings to LSP diagnostics: the range, the
// severity, the rule id as code with a link to its page, and the detail (a
// suggestion, the first declaration) after the message.
func (a *analysis) publishParams(u protocol.DocumentURI) *protocol.PublishDiagnosticsParams {
	out := make([]protocol.Diagnostic, 0, len(a.diags))
	for _, f := range a.diags {
		out = append(out, a.lspDiagnostic(f))
	}
	p := &protocol.PublishDiagnosticsParams{URI: u, Diagnostics: out}
	if a.version > 0 {
		p.Version = uint32(a.version)
	}
	return p
}

func (a *analysis) lspDiagnostic(f diag.Diagnostic) protocol.Diagnostic {
	msg := f.Message
	if f.Detail != "" {
		msg += "\n" + f.Detail
	}
	d := protocol.Diagnostic{
		Range:    a.lines.rangeOf(f.Range),
		Severity: lspSeverity(f.Severity),
		Code:     f.Rule,
		Source:   "pipec",
		Message:  msg,
	}
	// Only catalogue rules have a page; a configuration finding or an
	// internal failure links nowhere rather than to a missing page.
	if lint.Lookup(f.Rule) != nil {
		d.CodeDescription = &protocol.CodeDescription{Href: protocol.URI(lint.DocURL(f.Rule))}
	}
	return d
}

func lspSeverity(s diag.Severity) protocol.DiagnosticSeverity {
	switch s {
	case diag.Error:
		return protocol.DiagnosticSeverityError
	case diag.Warning:
		return protocol.DiagnosticSeverityWarning
	}
	return protocol.DiagnosticSeverityInformation
}
