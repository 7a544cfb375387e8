package store

import (
	"net/url"
	"strings"
	"testing"
)

// TestLocationStringHidesPasswords: a server location is printed in every
// message about its state (a URL that does not parse, a server that does not
// answer), so neither the user info's password nor a password given as a
// query parameter may show.
func TestLocationStringHidesPasswords(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://pipec:s3cret@db.internal:5432/pipec?sslmode=require", "postgres://pipec:xxxxx@db.internal:5432/pipec?sslmode=require"},
		{"postgres:///pipec?host=/run/pg&user=pipec&password=s3cret&connect_timeout=abc", "postgres:///pipec?host=/run/pg&user=pipec&password=xxxxx&connect_timeout=abc"},
		{"postgresql://db/pipec?sslpassword=s3cret&PassWord=s3cret", "postgresql://db/pipec?sslpassword=xxxxx&PassWord=xxxxx"},
		{"postgres://pipec@/pipec?host=/run/pg", "postgres://pipec@/pipec?host=/run/pg"},
		{"postgres://pipec:s3cret@[::1/pipec", "postgres://(unparsable URL)"},
	} {
		loc, err := ParseLocation(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := loc.String(); got != c.want || strings.Contains(got, "s3cret") {
			t.Errorf("Location(%q).String() = %q, want %q", c.in, got, c.want)
		}
	}
	if _, err := ParseLocation("mysql://u:s3cret@h/db?password=s3cret"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("an unknown scheme: %v", err)
	}
}

// TestLocationKeywordValue: a libpq keyword/value string is a PostgreSQL
// server, never the name of an SQLite file, and its password never shows
// (String masks it, WithoutPassword drops it, Hide masks it in a driver's
// message); a file name with "=" in it is still a file.
func TestLocationKeywordValue(t *testing.T) {
	for _, c := range []struct{ in, str, bare string }{
		{"host=/run/pg user=u password=s3cret dbname=d", "host=/run/pg user=u password=xxxxx dbname=d", "host=/run/pg user=u dbname=d"},
		{"  dbname = pipec   password = 's3cret \\'s3cret'  search_path=t1 ", "dbname=pipec password=xxxxx search_path=t1", "dbname=pipec search_path=t1"},
		{"host=db sslpassword=s3cret application_name='a b'", "host=db sslpassword=xxxxx application_name='a b'", "host=db application_name='a b'"},
		{"service=prod", "service=prod", "service=prod"},
	} {
		loc, err := ParseLocation(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if !loc.Server || loc.Path != "" {
			t.Errorf("%q: not a server location: %+v", c.in, loc)
			continue
		}
		if got := loc.String(); got != c.str || strings.Contains(got, "s3cret") {
			t.Errorf("Location(%q).String() = %q, want %q", c.in, got, c.str)
		}
		if got := loc.WithoutPassword(); got != c.bare {
			t.Errorf("Location(%q).WithoutPassword() = %q, want %q", c.in, got, c.bare)
		}
		if got := loc.Hide("cannot parse `" + c.in + "`"); strings.Contains(got, "s3cret") {
			t.Errorf("Hide left the password: %q", got)
		}
	}
	for _, file := range []string{"state.db", ".pipec/state.db", "a=b.db", "./host=x.db", "dir/dbname=x", "odd=1 host='unterminated"} {
		loc, err := ParseLocation(file)
		if err != nil {
			t.Fatal(err)
		}
		if loc.Server || loc.Path != file {
			t.Errorf("%q: want a file, got %+v", file, loc)
		}
	}
	// A broken connection string with a password is refused, never taken
	// for a file (which would print it, and make it part of a file's name).
	for _, bad := range []string{"host=/run/pg dbname=d password=s3cret sslmode", "host=db password='s3cret", "x sslpassword=s3cret"} {
		if loc, err := ParseLocation(bad); err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: got %+v, %v; want an error without the password", bad, loc, err)
		}
	}
}

// TestLocationURLHide: a URL's passwords are masked in a driver's message.
func TestLocationURLHide(t *testing.T) {
	loc, err := ParseLocation("postgres://u:s3cret@db/pipec?sslpassword=0ther")
	if err != nil {
		t.Fatal(err)
	}
	if got := loc.Hide("failed: postgres://u:s3cret@db/pipec?sslpassword=0ther"); strings.Contains(got, "s3cret") || strings.Contains(got, "0ther") {
		t.Errorf("Hide = %q", got)
	}
}

// FuzzLocationHidesPasswords puts an arbitrary password in each place a
// --state value can hold one (a URL's user info, a URL parameter, a
// keyword/value pair), written as a person would have to write it there,
// with arbitrary text around it: the printed location, the one tasks get
// and a driver's message quoting the password never show it.
func FuzzLocationHidesPasswords(f *testing.F) {
	f.Add("s3cret", "db.internal:5432", "sslmode=require", uint8(0))
	f.Add("p@ss word'\\x", "/run/pg", "", uint8(1))
	f.Add("a=b&c", "h", "user=u", uint8(2))
	f.Add("%zz", "[::1", "x=y", uint8(3))
	f.Fuzz(func(t *testing.T, suffix, host, extra string, form uint8) {
		pw := "Pw7q" + suffix // a marker no template or mask contains
		// A host is a name, an address or a folder: what would end it
		// makes another location, which the other forms cover.
		host = strings.Map(func(r rune) rune {
			if strings.ContainsRune("@?#&='\\ \t\n\r\v\f", r) {
				return -1
			}
			return r
		}, host)
		var in string
		switch form % 4 {
		case 0:
			in = "postgres://" + url.UserPassword("pipec", pw).String() + "@" + host + "/db?" + extra
		case 1:
			in = "postgresql://" + host + "/db?" + extra + "&password=" + url.QueryEscape(pw)
		case 2:
			in = "host=" + host + " dbname=d password='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw) + "' " + extra
		case 3:
			in = "postgres://u@" + host + "/db?sslpassword=" + url.QueryEscape(pw) + "&" + extra
		}
		loc, err := ParseLocation(in)
		if err != nil {
			if strings.Contains(err.Error(), pw) {
				t.Fatalf("ParseLocation(%q): the error shows the password: %v", in, err)
			}
			return
		}
		shown := map[string]string{
			"String":          loc.String(),
			"WithoutPassword": loc.WithoutPassword(),
			"Hide":            loc.Hide("cannot parse `" + in + "`: password " + pw),
		}
		for what, s := range shown {
			for _, leak := range []string{pw, url.QueryEscape(pw), url.PathEscape(pw)} {
				// (unless the text around it, typed as it is, holds it too)
				if strings.Contains(s, leak) && !strings.Contains(extra+"\x00"+host, leak) {
					t.Fatalf("%s of %q shows the password %q: %s", what, in, pw, s)
				}
			}
		}
	})
}
