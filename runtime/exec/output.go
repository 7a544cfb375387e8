package exec

import (
	"bytes"
	"encoding/json"
	"io"
	"sort"
	"strings"
	"sync"
)

// Mask replaces a secret value in logs and tails.
const Mask = "***"

// Redactor masks the secret values of one run wherever pipec writes or
// prints text: it is made once per run from every secret_env value of the
// plan (a task that did not declare a secret may still print it, a check may
// quote it from the data) and applied at the boundaries: the store's event
// log and error texts, what OnEvent reports, the summary, and task logs.
// The zero value and a nil Redactor mask nothing.
type Redactor struct {
	secrets []string // longest first
	// quoted are the secrets as JSON writes them inside a string, when that
	// differs (a quote, a backslash, <, >, & or a control character).
	quoted []string
}

// NewRedactor masks the given values; empty ones are ignored.
func NewRedactor(secrets []string) *Redactor {
	r := &Redactor{secrets: sortSecrets(secrets)}
	for _, s := range r.secrets {
		b, err := json.Marshal(s)
		if q := string(b); err == nil && q[1:len(q)-1] != s {
			r.quoted = append(r.quoted, q[1:len(q)-1])
		}
	}
	return r
}

// Secrets are the masked values, longest first (for a process's stream).
func (r *Redactor) Secrets() []string {
	if r == nil {
		return nil
	}
	return r.secrets
}

// String masks s.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	for _, v := range r.secrets {
		s = strings.ReplaceAll(s, v, Mask)
	}
	return s
}

// JSON masks an encoded JSON document: the secrets as written and as JSON
// escapes them inside strings.
func (r *Redactor) JSON(b []byte) []byte {
	if r == nil || len(r.secrets) == 0 {
		return b
	}
	s := r.String(string(b))
	for _, q := range r.quoted {
		s = strings.ReplaceAll(s, q, Mask)
	}
	return []byte(s)
}

// Value masks every string inside v (maps, slices, strings; other values are
// returned as they are), for event data before it is encoded.
func (r *Redactor) Value(v any) any {
	if r == nil || len(r.secrets) == 0 {
		return v
	}
	switch x := v.(type) {
	case string:
		return r.String(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = r.Value(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = r.Value(e)
		}
		return out
	case []string:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = r.String(e)
		}
		return out
	case error:
		return r.String(x.Error())
	}
	return v
}

// Redact replaces every secret value in s with Mask. Empty values are ignored;
// longer values are replaced first so that a secret containing another is
// masked whole.
func Redact(s string, secrets []string) string {
	for _, v := range sortSecrets(secrets) {
		s = strings.ReplaceAll(s, v, Mask)
	}
	return s
}

func sortSecrets(secrets []string) []string {
	var out []string
	for _, s := range secrets {
		if s != "" {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out
}

// redactor masks secrets in a stream. A secret may be split across two
// writes, so output that could be the start of a secret is held back until
// more arrives or Flush is called. At one position the longest secret that
// matches wins, so a secret containing another is masked whole.
type redactor struct {
	w       io.Writer
	secrets [][]byte
	pending []byte
}

func newRedactor(w io.Writer, secrets []string) *redactor {
	r := &redactor{w: w}
	for _, s := range sortSecrets(secrets) {
		r.secrets = append(r.secrets, []byte(s))
	}
	return r
}

func (r *redactor) Write(p []byte) (int, error) {
	if len(r.secrets) == 0 {
		return r.w.Write(p)
	}
	r.pending = append(r.pending, p...)
	if out := r.mask(false); len(out) > 0 {
		if _, err := r.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// mask returns the masked output that is certain and keeps the rest pending.
// With final set, nothing can follow, so nothing is held back.
func (r *redactor) mask(final bool) []byte {
	b := r.pending
	out := make([]byte, 0, len(b))
	i := 0
scan:
	for i < len(b) {
		rest := b[i:]
		if !final {
			for _, s := range r.secrets {
				if len(rest) < len(s) && bytes.HasPrefix(s, rest) {
					break scan // may become a secret with the next write
				}
			}
		}
		for _, s := range r.secrets {
			if bytes.HasPrefix(rest, s) {
				out = append(out, Mask...)
				i += len(s)
				continue scan
			}
		}
		out = append(out, b[i])
		i++
	}
	r.pending = append(r.pending[:0], b[i:]...)
	return out
}

// Flush writes what was held back; the stream has ended.
func (r *redactor) Flush() error {
	if len(r.pending) == 0 {
		return nil
	}
	_, err := r.w.Write(r.mask(true))
	return err
}

// tail keeps the last n bytes written to it.
type tail struct {
	mu  sync.Mutex
	n   int
	buf []byte
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= t.n {
		t.buf = append(t.buf[:0], p[len(p)-t.n:]...)
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.n; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// LastLines returns at most n lines and max bytes of the end of s, for the
// error tail kept in the store.
func LastLines(s string, n, max int) string {
	s = strings.TrimRight(s, "\n")
	if len(s) > max {
		s = s[len(s)-max:]
		if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
