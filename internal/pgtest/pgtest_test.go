package pgtest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServer starts a real server, talks to it over its socket, checks it
// listens on no TCP address and runs as a non-root user, then stops it by
// its pid and checks the process and the folder are gone.
func TestServer(t *testing.T) {
	bin, err := FindBin()
	if err != nil {
		Unavailable(t, err)
	}
	s, err := StartServer(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	ctx := context.Background()
	out, err := s.Psql(ctx, "", "SELECT current_setting('listen_addresses') || '|' || current_user || '|' || (SELECT usesuper::text FROM pg_user WHERE usename = current_user)")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out); got != "|postgres|true" {
		t.Fatalf("listen_addresses|user|super = %q, want |postgres|true", got)
	}
	if _, err := os.Stat(filepath.Join(s.SocketDir, ".s.PGSQL.5432")); err != nil {
		t.Fatalf("socket: %v", err)
	}
	fi, err := os.Stat(filepath.Join(s.Dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid == 0 {
		t.Fatalf("data directory owned by root; the server must not run as root")
	}
	url := s.NewSchema(t)
	if !strings.Contains(url, "search_path=t1") {
		t.Fatalf("schema URL %q", url)
	}
	pid := s.Pid()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("postgres pid %d still exists after Stop (kill 0: %v)", pid, err)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Fatalf("folder %s left behind: %v", s.Dir, err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// TestHelperMissing is run by TestMissingSkipsOrFails in a child process.
func TestHelperMissing(t *testing.T) {
	if os.Getenv("PIPEC_PGTEST_HELPER") != "1" {
		t.Skip("helper for TestMissingSkipsOrFails")
	}
	Start(t)
	t.Fatal("Start returned without PostgreSQL")
}

// TestMissingSkipsOrFails runs Start in a child test process with no
// PostgreSQL binaries: it skips, and fails when PIPEC_REQUIRE_POSTGRES=1.
func TestMissingSkipsOrFails(t *testing.T) {
	for _, c := range []struct {
		require  string
		wantFail bool
		want     string
	}{
		{"", false, "PostgreSQL unavailable, skipping"},
		{"1", true, "PostgreSQL is required (PIPEC_REQUIRE_POSTGRES=1) but unavailable"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMissing$", "-test.v")
		cmd.Env = append(os.Environ(), "PIPEC_PGTEST_HELPER=1", "PIPEC_PG_BIN="+t.TempDir(), RequireEnv+"="+c.require)
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != c.wantFail {
			t.Errorf("require=%q: failed=%v, want %v\n%s", c.require, failed, c.wantFail, out)
		}
		if !strings.Contains(string(out), c.want) {
			t.Errorf("require=%q: output lacks %q:\n%s", c.require, c.want, out)
		}
	}
}
