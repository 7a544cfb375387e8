// Package pgtest runs a real, throwaway PostgreSQL server for tests.
//
// It uses the server binaries of the machine's PostgreSQL packages (Debian's
// /usr/lib/postgresql/<major>/bin), runs initdb into a fresh temporary
// folder and starts the postgres server there, listening on a unix socket in
// that folder only (listen_addresses = ”), so tests never touch a port, a
// system cluster or each other. initdb and postgres refuse to run as root:
// when the test runs as root, both run as the "postgres" user, and the folder
// is owned by that user. The server is stopped by its pid (SIGINT, the fast
// shutdown) when the test ends, and dies with the test process if that is
// killed first (parent-death signal).
//
// Without PostgreSQL the tests that need it skip with a message, except when
// PIPEC_REQUIRE_POSTGRES=1 (CI), where they fail: a missing server must not
// turn a whole suite green by skipping it.
//
// Packages such as embedded-postgres download binaries at run time, which
// fails on machines without network access; this fixture needs nothing but
// the installed packages.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/netdelay"
	"github.com/pipec/pipec/internal/proctree"
)

// RequireEnv is the environment variable that makes a missing PostgreSQL a
// test failure instead of a skip.
const RequireEnv = "PIPEC_REQUIRE_POSTGRES"

// Server is one running PostgreSQL server.
type Server struct {
	// Dir is the temporary folder holding the data directory ("data") and
	// the socket ("sock").
	Dir string
	// SocketDir is the folder of the server's unix socket.
	SocketDir string
	// Port names the socket file (.s.PGSQL.<port>); nothing listens on TCP.
	Port int
	// Bin is the folder of the PostgreSQL binaries used.
	Bin string

	cmd     *exec.Cmd
	cred    *syscall.Credential
	exited  chan struct{}
	waitErr error
	log     *bytes.Buffer
	stopped atomic.Bool
	schemas atomic.Int64
}

// FindBin returns the folder of the PostgreSQL binaries: $PIPEC_PG_BIN when
// set (and only it), else the newest /usr/lib/postgresql/*/bin holding both
// initdb and postgres, else the folder of initdb on $PATH.
func FindBin() (string, error) {
	if d := os.Getenv("PIPEC_PG_BIN"); d != "" {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
		return "", fmt.Errorf("PIPEC_PG_BIN=%s holds no initdb and postgres", d)
	}
	var candidates []string
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest major first: compare the version folder numerically.
	sort.Slice(dirs, func(i, j int) bool { return major(dirs[i]) > major(dirs[j]) })
	candidates = append(candidates, dirs...)
	if p, err := exec.LookPath("initdb"); err == nil {
		candidates = append(candidates, filepath.Dir(p))
	}
	for _, d := range candidates {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, postgres) in /usr/lib/postgresql/*/bin or $PATH; install the postgresql package")
}

func major(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Start starts a server for the test and stops it when the test ends. When
// PostgreSQL is missing it skips the test, or fails it when
// PIPEC_REQUIRE_POSTGRES=1.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := FindBin()
	if err != nil {
		Unavailable(t, err)
	}
	s, err := StartServer(bin)
	if err != nil {
		t.Fatalf("start PostgreSQL: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stop PostgreSQL: %v", err)
		}
	})
	return s
}

// Unavailable skips the test with why, or fails it when PostgreSQL is
// required.
func Unavailable(t testing.TB, why error) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("PostgreSQL is required (%s=1) but unavailable: %v", RequireEnv, why)
	}
	t.Skipf("PostgreSQL unavailable, skipping (set %s=1 to fail instead): %v", RequireEnv, why)
}

// StartServer runs initdb and starts the server from the binaries in bin.
// The caller must Stop it.
func StartServer(bin string) (*Server, error) {
	cred, owner, err := runAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pipec-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, SocketDir: filepath.Join(dir, "sock"), Port: 5432, Bin: bin, log: &bytes.Buffer{}}
	fail := func(err error) (*Server, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Mkdir(s.SocketDir, 0o700); err != nil {
		return fail(err)
	}
	if owner != nil {
		for _, p := range []string{dir, s.SocketDir} {
			if err := os.Chown(p, owner.uid, owner.gid); err != nil {
				return fail(fmt.Errorf("give %s to the postgres user: %w", p, err))
			}
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = procAttr(cred, syscall.SIGKILL)
	initdb.Dir = dir
	initdb.Env = pgEnv()
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	s.cred = cred
	if err := s.start(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// start runs the postgres server on the data directory and waits until it
// accepts connections.
func (s *Server) start() error {
	data := filepath.Join(s.Dir, "data")
	s.cmd = exec.Command(filepath.Join(s.Bin, "postgres"), "-D", data,
		"-c", "listen_addresses=",
		"-c", "unix_socket_directories="+s.SocketDir,
		"-c", "port="+strconv.Itoa(s.Port),
		"-c", "max_connections=200",
		"-c", "shared_buffers=32MB",
		"-c", "dynamic_shared_memory_type=mmap",
		"-c", "logging_collector=off",
	)
	// PIPEC_PG_OPTIONS adds settings for a profiling session, e.g.
	// "shared_preload_libraries=pg_stat_statements" (space-separated).
	for _, o := range strings.Fields(os.Getenv("PIPEC_PG_OPTIONS")) {
		s.cmd.Args = append(s.cmd.Args, "-c", o)
	}
	// SIGINT is PostgreSQL's fast shutdown; it also arrives when the test
	// process dies without cleaning up (on Linux).
	s.cmd.SysProcAttr = procAttr(s.cred, syscall.SIGINT)
	s.cmd.Dir = s.Dir
	s.cmd.Env = pgEnv()
	s.log.Reset()
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	s.exited = exited
	cmd := s.cmd
	go func() {
		s.waitErr = cmd.Wait()
		close(exited)
	}()
	return s.waitReady(data, 60*time.Second)
}

// Crash stops the server the way a crash does (SIGQUIT: immediate shutdown,
// no checkpoint, crash recovery at the next start) and starts it again on
// the same data.
func (s *Server) Crash() error {
	if err := s.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return err
	}
	<-s.exited
	os.Remove(filepath.Join(s.Dir, "data", "postmaster.pid"))
	return s.start()
}

// Restart stops the server with a fast shutdown, keeps it down for down
// (clients see refused connections), and starts it again on the same data:
// a database restart or a short outage.
func (s *Server) Restart(down time.Duration) error {
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
		return err
	}
	<-s.exited
	time.Sleep(down)
	return s.start()
}

// Freeze stops every process of the server (SIGSTOP, the postmaster
// first, so that it starts no other): its connections stay open and
// nothing answers on them, as clients see a hung server, or a network that
// drops packets. Thaw resumes it.
func (s *Server) Freeze() error {
	if err := s.signalAll(syscall.SIGSTOP); err != nil {
		return err
	}
	// A process running when the signal came goes on until interrupted;
	// a test that freezes the server expects nothing more from it.
	if !proctree.WaitStopped(append([]int{s.cmd.Process.Pid}, proctree.Descendants(s.cmd.Process.Pid)...), 10*time.Second) {
		return errors.New("the server did not stop on SIGSTOP")
	}
	return nil
}

// Thaw resumes a server that Freeze stopped.
func (s *Server) Thaw() error { return s.signalAll(syscall.SIGCONT) }

// Frozen freezes the server (Freeze) until thaw is called, or the test
// ends; thaw may be called more than once.
func (s *Server) Frozen(t testing.TB) (thaw func()) {
	t.Helper()
	if err := s.Freeze(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	thaw = func() {
		once.Do(func() {
			if err := s.Thaw(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(thaw)
	return thaw
}

func (s *Server) signalAll(sig syscall.Signal) error {
	if err := s.cmd.Process.Signal(sig); err != nil {
		return err
	}
	for _, pid := range proctree.Descendants(s.cmd.Process.Pid) {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal %d: %w", pid, err)
		}
	}
	return nil
}

// pgEnv is the servers' environment: enough to run, nothing of the test's
// (no PG* variables that would redirect initdb).
func pgEnv() []string {
	env := []string{"LC_ALL=C", "LANG=C", "TZ=UTC"}
	if p := os.Getenv("PATH"); p != "" {
		env = append(env, "PATH="+p)
	}
	return env
}

type ids struct{ uid, gid int }

// runAs returns the credentials to run the server with: none when not root,
// the postgres user's when root.
func runAs() (*syscall.Credential, *ids, error) {
	if os.Geteuid() != 0 {
		return nil, nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, nil, fmt.Errorf("running as root, PostgreSQL must run as the postgres user: %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, nil, fmt.Errorf("postgres user has ids %q:%q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, &ids{uid, gid}, nil
}

// waitReady waits until the server says it accepts connections: the status
// line of postmaster.pid reads "ready" (as pg_ctl -w checks), or the server
// exits. The deadline only bounds a broken start.
func (s *Server) waitReady(data string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(filepath.Join(data, "postmaster.pid")); err == nil {
			lines := strings.Split(string(b), "\n")
			if len(lines) >= 8 && strings.TrimSpace(lines[7]) == "ready" {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited during start: %v\n%s", s.waitErr, s.log.String())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after %s\n%s", limit, s.log.String())
		}
	}
}

// Stop stops the server by its pid with a fast shutdown (SIGINT), waits for
// it to exit (SIGKILL after 30 s) and removes its folder. Stopping twice is a
// no-op.
func (s *Server) Stop() error {
	if s.stopped.Swap(true) {
		return nil
	}
	var err error
	if s.cmd != nil && s.cmd.Process != nil {
		if e := s.cmd.Process.Signal(syscall.SIGINT); e != nil && !errors.Is(e, os.ErrProcessDone) {
			err = e
		}
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
			err = errors.Join(err, errors.New("postgres ignored SIGINT for 30s, killed"))
		}
	}
	return errors.Join(err, os.RemoveAll(s.Dir))
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// URL is a connection URL for database db (postgres when empty) over the
// socket, as the postgres superuser. Extra query parameters (such as
// search_path) may be given as key, value pairs.
func (s *Server) URL(db string, params ...string) string {
	if db == "" {
		db = "postgres"
	}
	q := "host=" + s.SocketDir + "&port=" + strconv.Itoa(s.Port) + "&sslmode=disable"
	for i := 0; i+1 < len(params); i += 2 {
		q += "&" + params[i] + "=" + params[i+1]
	}
	return "postgres://postgres@/" + db + "?" + q
}

// Delayed is url (one of this server's, URL or NewSchema) through a
// loopback TCP proxy that delays every byte by oneWay in each direction
// (package netdelay): the server as a client on another machine sees it,
// a round trip twice oneWay away. The proxy closes with the test.
func (s *Server) Delayed(t testing.TB, url string, oneWay time.Duration) string {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(s.SocketDir, ".s.PGSQL."+strconv.Itoa(s.Port))
	p, err := netdelay.Start(func() (net.Conn, error) { return net.Dial("unix", sock) }, oneWay)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	q := u.Query()
	q.Del("host")
	q.Del("port")
	u.Host, u.RawQuery = p.Addr(), q.Encode()
	return u.String()
}

// Psql runs SQL with the server's psql as the superuser and returns its
// output (tab-separated, unaligned, no headers).
func (s *Server) Psql(ctx context.Context, db, sql string) (string, error) {
	if db == "" {
		db = "postgres"
	}
	cmd := exec.CommandContext(ctx, filepath.Join(s.Bin, "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
		"-h", s.SocketDir, "-p", strconv.Itoa(s.Port), "-U", "postgres", "-d", db, "-c", sql)
	cmd.Env = pgEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("psql: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// NewSchema creates a fresh, empty schema in the postgres database and
// returns a URL whose connections use it (search_path), so each test gets
// its own namespace on one server without the cost of CREATE DATABASE.
func (s *Server) NewSchema(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d", s.schemas.Add(1))
	if _, err := s.Psql(context.Background(), "", "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	return s.URL("", "search_path", name)
}

// Shared is one server for all the tests of a package, started by Main:
// starting a server costs about a second, a schema (NewSchema) almost
// nothing.
type Shared struct {
	srv *Server
	err error
}

// Main starts the shared server (if PostgreSQL is installed), runs the
// package's tests and stops the server. Use it from TestMain:
//
//	var pg pgtest.Shared
//	func TestMain(m *testing.M) { os.Exit(pg.Main(m)) }
func (sh *Shared) Main(m *testing.M) int {
	bin, err := FindBin()
	if err == nil {
		sh.srv, err = StartServer(bin)
	}
	sh.err = err
	code := m.Run()
	if sh.srv != nil {
		if err := sh.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop PostgreSQL:", err)
			code = max(code, 1)
		}
	}
	return code
}

// Server returns the shared server, or skips the test (fails it when
// PIPEC_REQUIRE_POSTGRES=1) when there is none.
func (sh *Shared) Server(t testing.TB) *Server {
	t.Helper()
	if sh.srv == nil {
		err := sh.err
		if err == nil {
			err = errors.New("pgtest.Shared used without its Main")
		}
		Unavailable(t, err)
	}
	return sh.srv
}
