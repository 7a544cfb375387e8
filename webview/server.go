package webview

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pipec/pipec/report"
	"github.com/pipec/pipec/runtime/store"
)

//go:embed assets/style.css assets/pages.html
var assets embed.FS

// css and pages are read and parsed on first use, not at start-up: every
// pipec command links this package, and parsing the templates took a tenth
// of `pipec --version`.
var (
	css = sync.OnceValue(func() string {
		b, err := assets.ReadFile("assets/style.css")
		if err != nil {
			panic(err)
		}
		return string(b)
	})
	pages = sync.OnceValue(func() *template.Template {
		return template.Must(template.New("pages").Funcs(template.FuncMap{
			"stamp": stamp,
			"dur":   duration,
			"add":   func(a, b int) int { return a + b },
			"clip":  clip,
			"sym":   symbol,
			"join":  strings.Join,
			// text escapes control characters of a raw id shown as text (its
			// href uses it raw: html/template escapes it for the URL).
			"text": report.Escape,
		}).ParseFS(assets, "assets/pages.html"))
	})
)

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05.000")
}

// page is what every template gets.
type page struct {
	Title     string
	State     string
	CSS       template.CSS
	Report    bool
	Generated time.Time
	LiveURL   string
	LiveSeq   int64

	Runs      []RunRow
	Pipelines []string
	States    []string
	Filter    RunFilter
	More      bool

	Run      *RunView
	DAG      DAGView
	Timeline TimelineView

	Artifact *ArtifactView

	Workers  []WorkerView
	HasQueue bool

	Message string
}

// Server serves the pages of one state.
type Server struct {
	Src *Source
	// StateName is how the pages name the state (a path or a URL with its
	// password removed).
	StateName string
	// Log receives handler errors (nil: discarded).
	Log *log.Logger
	// AnswerWithin bounds each page's reads of the state (0:
	// DefaultAnswerWithin): a state server that stopped answering, its
	// connections open, is then said not to answer, and a run's page,
	// which polls it, goes on polling until it answers again, instead of
	// waiting for ever on a request that never ends.
	AnswerWithin time.Duration
}

// DefaultAnswerWithin is Server.AnswerWithin's default.
const DefaultAnswerWithin = 10 * time.Second

// Handler returns the ui's routes. Every route is GET (or HEAD) only.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.runs)
	mux.HandleFunc("GET /run", s.run)
	mux.HandleFunc("GET /run/live", s.live)
	mux.HandleFunc("GET /artifact", s.artifact)
	mux.HandleFunc("GET /workers", s.workers)
	return secureHeaders(s.bounded(mux))
}

// answerWithin is AnswerWithin, or its default.
func (s *Server) answerWithin() time.Duration { return cmp.Or(s.AnswerWithin, DefaultAnswerWithin) }

// bounded gives each request AnswerWithin to read the state (fail says a
// read that ran out of it).
func (s *Server) bounded(h http.Handler) http.Handler {
	d := s.answerWithin()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// secureHeaders: the pages load nothing from elsewhere, run only their own
// inline script and may not be framed.
func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

func (s *Server) base(title string) *page {
	return &page{Title: title, State: s.Src.text(s.StateName), CSS: template.CSS(css())}
}

func (s *Server) render(w http.ResponseWriter, name string, p *page, status int) {
	var b bytes.Buffer
	if err := render(&b, s.Src, name, p); err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// render executes a template, masking secrets once more in the result.
func render(w io.Writer, src *Source, name string, p *page) error {
	var b bytes.Buffer
	if err := pages().ExecuteTemplate(&b, name, p); err != nil {
		return err
	}
	_, err := io.WriteString(w, src.Redactor.String(b.String()))
	return err
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	if s.Log != nil {
		s.Log.Printf("ui: %v", err)
	}
	status := http.StatusInternalServerError
	title := "Cannot read the state"
	msg := err.Error()
	switch {
	case errors.Is(err, errNoRun) || errors.Is(err, store.ErrNotFound):
		status, title = http.StatusNotFound, "Not found"
	case errors.Is(err, context.DeadlineExceeded):
		status, title = http.StatusServiceUnavailable, "The state does not answer"
		msg = fmt.Sprintf("the state did not answer within %s (%v); reload the page to try again", s.answerWithin(), err)
	case errors.Is(err, store.ErrUnreachable):
		status, title = http.StatusServiceUnavailable, "The state does not answer"
		msg += "; reload the page to try again"
	}
	p := s.base(title)
	p.Message = s.Src.text(msg)
	var b bytes.Buffer
	if render(&b, s.Src, "error", p) != nil {
		http.Error(w, title, status)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

func (s *Server) runs(w http.ResponseWriter, r *http.Request) {
	f := RunFilter{Pipeline: r.URL.Query().Get("pipeline"), State: r.URL.Query().Get("state")}
	rows, pipelines, more, err := s.Src.Runs(r.Context(), f)
	if err != nil {
		s.fail(w, err)
		return
	}
	p := s.base("Runs")
	p.Runs, p.Pipelines, p.More = rows, pipelines, more
	p.States = []string{string(store.RunRunning), string(store.RunSucceeded), string(store.RunFailed)}
	p.Filter = RunFilter{Pipeline: s.Src.text(f.Pipeline), State: f.State}
	s.render(w, "runs", p, http.StatusOK)
}

func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	v, err := s.Src.LoadRun(r.Context(), r.URL.Query().Get("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	p := runPage(s.base("Run "+report.Escape(v.ID)), v)
	if v.Running() {
		p.LiveURL = "/run/live?id=" + url.QueryEscape(v.Run.ID) + "&seq=" + strconv.FormatInt(v.LastSeq, 10)
		p.LiveSeq = v.LastSeq
	}
	s.render(w, "run", p, http.StatusOK)
}

func runPage(p *page, v *RunView) *page {
	p.Run, p.DAG, p.Timeline = v, v.DAG(), v.Timeline()
	return p
}

// live answers the run page's refresh script: the run's state and the
// sequence number of its last event. The page sends the number it shows
// (seq), so a store that can tail its log reads only what is new.
func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	seq, _ := strconv.ParseInt(r.URL.Query().Get("seq"), 10, 64)
	run, err := s.Src.Store.GetRun(r.Context(), id)
	if err != nil {
		s.fail(w, err)
		return
	}
	evs, err := store.EventsAfter(r.Context(), s.Src.Store, id, seq)
	if err != nil {
		s.fail(w, err)
		return
	}
	if len(evs) > 0 {
		seq = evs[len(evs)-1].Seq
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"state": run.State, "seq": seq})
}

func (s *Server) artifact(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a, err := s.Src.LoadArtifact(r.Context(), q.Get("pipeline"), q.Get("name"))
	if err != nil {
		s.fail(w, err)
		return
	}
	p := s.base("Artifact " + a.Artifact)
	p.Artifact = a
	s.render(w, "artifact", p, http.StatusOK)
}

func (s *Server) workers(w http.ResponseWriter, r *http.Request) {
	ws, ok, err := s.Src.Workers(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	p := s.base("Workers")
	p.Workers, p.HasQueue = ws, ok
	s.render(w, "workers", p, http.StatusOK)
}

// Report writes the page of one run as a self-contained HTML file: the
// stylesheet inline, the DAG and the timeline inline SVG, no script and no
// link that needs a server.
func Report(ctx context.Context, w io.Writer, src *Source, stateName, run string) error {
	v, err := src.LoadRun(ctx, run)
	if err != nil {
		return err
	}
	p := &page{Title: "Run " + report.Escape(v.ID), State: src.text(stateName), CSS: template.CSS(css()), Report: true, Generated: src.now()}
	return render(w, src, "run", runPage(p, v))
}

// IsNoRun reports whether err says the run does not exist.
func IsNoRun(err error) bool { return errors.Is(err, errNoRun) }
