package cli_test

import (
	neturl "net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/internal/pgtest"
	"github.com/pipec/pipec/internal/tracked"
)

// TestReportOnPostgres: pipec report reads a run from a PostgreSQL state
// as from an SQLite one, and its page names the state without the URL's
// password.
func TestReportOnPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.NewSchema(t)
	dir := t.TempDir()
	tracked.Copy(t, filepath.Join("..", "examples", "orders"), dir) // not the main job's state and sink
	spec := filepath.Join(dir, "pipeline.hcl")
	if code, out, errs := pipecIn(t, nil, "run", spec, "--interval", "2024-01-01", "--state", url); code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs := pipecIn(t, nil, "report", "orders/2024-01-01/r1", "--spec", spec, "--state", url, "-o", "-")
	if code != 0 {
		t.Fatalf("report: exit %d\n%s", code, errs)
	}
	for _, want := range []string{`data-task="extract" data-attempt="1"`, `data-task="clean" data-attempt="1"`,
		`data-from="extract" data-to="clean"`, `data-outcome="won"`} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if u, err := neturl.Parse(url); err == nil {
		if pw, ok := u.User.Password(); ok && strings.Contains(out, pw) {
			t.Error("the report shows the state URL's password")
		}
	}
}
