package store

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
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
	return Location{Value: value, Path: value}, nil
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

// secrets are the passwords in a server location.
func (l Location) secrets() []string {
	var out []string
	for _, p := range l.dsn {
		if secretKey(p.key) {
			out = append(out, p.raw, p.value) // the longer, as typed, first
		}
	}
	if l.dsn == nil && l.Server {
		if u, err := url.Parse(l.Value); err == nil {
			if pw, ok := u.User.Password(); ok {
				out = append(out, pw)
			}
			for k, vs := range u.Query() {
				if secretKey(k) {
					out = append(out, vs...)
				}
			}
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
	return u.Redacted()
}
