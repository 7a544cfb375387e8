package store

import (
	"regexp"
	"strings"
)

// A libpq keyword/value connection string ("host=/run/pg user=u
// password=… dbname=d") is the other common way to give PostgreSQL's
// credentials. ParseLocation recognises one, so it is opened as the server
// (pgx's ParseConfig reads it), never taken as the name of an SQLite file;
// and its password, like a URL's, is never shown.

// dsnPair is one keyword=value of a connection string: the value unquoted,
// and as typed (quotes and escapes included).
type dsnPair struct{ key, value, raw string }

// libpqKeywords are the connection keywords of libpq (and pgx) that make a
// keyword/value string a PostgreSQL one; any other keyword (pgx passes it as
// a run-time parameter, such as search_path) may follow them.
var libpqKeywords = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true,
	"password": true, "passfile": true, "service": true, "sslmode": true,
	"connect_timeout": true, "application_name": true, "target_session_attrs": true,
	"sslcert": true, "sslkey": true, "sslrootcert": true, "sslpassword": true, "options": true,
}

var dsnKeyword = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// parseDSN reads s as a libpq keyword/value string, as libpq and pgx do:
// pairs separated by white space, `=` with optional white space around it,
// a value either single-quoted or ending at white space, a backslash
// escaping the next character in either. ok is false when s is not one: a
// piece without `=`, a keyword that is not a lower-case identifier
// (".pipec/a=b.db" is a file), an unterminated quote, or no libpq
// connection keyword at all.
func parseDSN(s string) (pairs []dsnPair, ok bool) {
	const space = " \t\n\r\v\f"
	s = strings.TrimLeft(s, space)
	known := false
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return nil, false
		}
		key := strings.TrimRight(s[:eq], space)
		if !dsnKeyword.MatchString(key) {
			return nil, false
		}
		known = known || libpqKeywords[key]
		s = strings.TrimLeft(s[eq+1:], space)
		rest := s
		var val strings.Builder
		if strings.HasPrefix(s, "'") {
			s = s[1:]
			closed := false
			for len(s) > 0 {
				c := s[0]
				s = s[1:]
				if c == '\\' && len(s) > 0 {
					val.WriteByte(s[0])
					s = s[1:]
					continue
				}
				if c == '\'' {
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return nil, false
			}
		} else {
			for len(s) > 0 && !strings.ContainsRune(space, rune(s[0])) {
				c := s[0]
				s = s[1:]
				if c == '\\' {
					if len(s) == 0 {
						break
					}
					c = s[0]
					s = s[1:]
				}
				val.WriteByte(c)
			}
		}
		pairs = append(pairs, dsnPair{key, val.String(), rest[:len(rest)-len(s)]})
		s = strings.TrimLeft(s, space)
	}
	return pairs, known && len(pairs) > 0
}

// secretKey reports whether a parameter holds a secret: any name with
// "pass" in it (password, sslpassword), as for a URL's query.
func secretKey(k string) bool { return strings.Contains(strings.ToLower(k), "pass") }

// formatDSN writes pairs back as a keyword/value string, quoting a value
// that needs it; a secret's value is written as mask, or the pair is left
// out when mask is "".
func formatDSN(pairs []dsnPair, mask string) string {
	var parts []string
	for _, p := range pairs {
		v := p.value
		if secretKey(p.key) {
			if mask == "" {
				continue
			}
			v = mask
		}
		if v == "" || strings.ContainsAny(v, " \t\n\r\v\f'\\") {
			v = "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
		}
		parts = append(parts, p.key+"="+v)
	}
	return strings.Join(parts, " ")
}
