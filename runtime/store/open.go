package store

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strings"
)

// Location is where a state lives, parsed from a --state value (or
// PIPEC_STATE): a path to an SQLite file, or a PostgreSQL server given as a
// URL (postgres://…) or as a libpq keyword/value string (host=… dbname=…).
type Location struct {
	// Value is what was given.
	Value string
	// Path is the SQLite database file; empty for a server.
	Path string
	// Server is true for a database server's URL (postgres://…) or
	// keyword/value string, which Value holds and runtime/store/postgres
	// opens (that package imports this one, so the opening itself is
	// runtime/store/backend's).
	Server bool
	// dsn is Value's pairs when it is a keyword/value string.
	dsn []dsnPair
}

// serverSchemes are the URL schemes of database servers pipec has a store
// for.
var serverSchemes = []string{"postgres", "postgresql"}

// ParseLocation reads a --state value. A URL with a scheme this build has
// no store for is refused with a message, never read as a file name; a
// libpq keyword/value string (parseDSN) is a PostgreSQL server.
func ParseLocation(value string) (Location, error) {
	if value == "" {
		return Location{}, errors.New("no state given")
	}
	if scheme, _, ok := strings.Cut(value, "://"); ok && !strings.ContainsAny(scheme, `/\`) {
		for _, s := range serverSchemes {
			if strings.EqualFold(scheme, s) {
				return Location{Value: value, Server: true}, nil
			}
		}
		return Location{}, fmt.Errorf("state %q: this pipec has no store for %s:// URLs (give the path of an SQLite file or a postgres:// URL)",
			redactURL(value), scheme)
	}
	if pairs, ok := parseDSN(value); ok {
		return Location{Value: value, Server: true, dsn: pairs}, nil
	}
	if namesSecret(value) {
		// Taken for a file, it would be printed in messages and its
		// password made part of a file's name.
		return Location{}, errors.New("state: the value holds a password (password=…) but is not a keyword/value connection string; " +
			"write keyword=value pairs separated by spaces, a value with spaces or quotes in single quotes (the value is not shown)")
	}
	return Location{Value: value, Path: value}, nil
}

// namesSecret reports whether a value that is not a connection string
// still has a word that starts as a password pair does (password=,
// sslpassword=).
func namesSecret(value string) bool {
	for _, f := range strings.Fields(value) {
		if k, _, ok := strings.Cut(f, "="); ok && dsnKeyword.MatchString(k) && secretKey(k) {
			return true
		}
	}
	return false
}

// Exists reports whether the state was ever created (status and events
// never create one).
func (l Location) Exists() (bool, error) {
	if l.Server {
		return true, nil // a server's schema is made on first open; reading an empty one shows nothing
	}
	_, err := os.Stat(l.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// String is the location as a person typed it, a password masked (a URL's,
// or a keyword/value string's): it is printed in messages and recorded in
// sinks.
func (l Location) String() string {
	switch {
	case l.dsn != nil:
		return formatDSN(l.dsn, "xxxxx")
	case l.Server:
		return redactURL(l.Value)
	}
	return l.Value
}

// WithoutPassword is a server location with no password at all (a URL's
// user info and password parameters, a keyword/value string's password
// pairs left out): what tasks get as PIPEC_STATE. "" for a file.
func (l Location) WithoutPassword() string {
	switch {
	case l.dsn != nil:
		return formatDSN(l.dsn, "")
	case !l.Server:
		return ""
	}
	u, err := url.Parse(l.Value)
	if err != nil {
		scheme, _, _ := strings.Cut(l.Value, "://")
		return scheme + "://"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	for k := range q {
		if secretKey(k) {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	u.Fragment, u.RawFragment = "", "" // as redactURL
	return u.String()
}

// Hide masks the location's secrets (the passwords it holds) in a message
// that may quote them, such as a driver's error about the connection
// string.
func (l Location) Hide(msg string) string {
	for _, s := range l.secrets() {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	return msg
}

// secrets are the passwords in a server location, each as typed and as
// read, the longest first (so that a password inside another is not
// masked alone, leaving the rest of the longer one).
func (l Location) secrets() []string {
	var out []string
	for _, p := range l.dsn {
		if secretKey(p.key) {
			out = append(out, p.raw, p.value)
		}
	}
	if l.dsn == nil && l.Server {
		out = urlSecrets(l.Value)
	}
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// urlSecrets are the passwords of a server URL, read from its text alone so
// that a URL that does not parse (which a driver's message may still
// quote) is covered too: the user info's password and every parameter named
// like one, each as typed (escaped) and unescaped.
func urlSecrets(v string) []string {
	var out []string
	add := func(raw string, unescape func(string) (string, error)) {
		out = append(out, raw)
		if s, err := unescape(raw); err == nil {
			out = append(out, s)
		}
	}
	_, rest, _ := strings.Cut(v, "://")
	authority, query, _ := strings.Cut(rest, "?")
	authority, _, _ = strings.Cut(authority, "/")
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		if _, pw, ok := strings.Cut(authority[:at], ":"); ok {
			add(pw, url.PathUnescape)
		}
	}
	// A fragment's pairs count too: a driver ignores them, but they were
	// typed as parameters.
	for _, p := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == '#' }) {
		k, val, ok := strings.Cut(p, "=")
		if name, err := url.QueryUnescape(k); ok && (err != nil || secretKey(name)) {
			add(val, url.QueryUnescape)
		}
	}
	return out
}

// redactURL masks the password of a URL ("postgres://u:xxxxx@host/db"),
// given in its user info or as a query parameter (libpq's password=, or
// any parameter named like one, such as sslpassword=); a value that does
// not parse is shown as its scheme alone.
func redactURL(v string) string {
	u, err := url.Parse(v)
	if err != nil {
		scheme, _, _ := strings.Cut(v, "://")
		return scheme + "://(unparsable URL)"
	}
	// Parameter by parameter, so the rest reads as it was typed.
	params := strings.Split(u.RawQuery, "&")
	for i, p := range params {
		k, _, ok := strings.Cut(p, "=")
		if name, err := url.QueryUnescape(k); ok && (err != nil || strings.Contains(strings.ToLower(name), "pass")) {
			params[i] = k + "=xxxxx"
		}
	}
	u.RawQuery = strings.Join(params, "&")
	u.Fragment, u.RawFragment = "", "" // nothing a connection reads; it may hold what was typed as a parameter
	return u.Redacted()
}
