package store

import (
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
