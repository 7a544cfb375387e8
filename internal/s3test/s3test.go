// Package s3test starts a real S3-compatible server for tests: versitygw
// serving a temporary folder on a free loopback port. versitygw is not a
// dependency of the module: .ci/run installs it (go install
// github.com/versity/versitygw/cmd/versitygw@v1.8.0) into a cache on PATH.
// Without it the tests skip, unless PIPEC_REQUIRE_S3=1 (then they fail).
package s3test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/proctree"
	"github.com/pipec/pipec/runtime/objstore"
)

// Credentials of the test server.
const (
	AccessKey = "pipectestaccess"
	SecretKey = "pipec-test-secret-0123456789"
)

// Server is a running versitygw.
type Server struct {
	// Endpoint is http://127.0.0.1:PORT.
	Endpoint string
	// Dir is the folder it serves (a bucket is a folder in it).
	Dir string
	// Env is what a process needs to use it (AWS_ENDPOINT_URL, keys,
	// region).
	Env  []string
	port int
	cmd  *exec.Cmd
	bin  string
	t    testing.TB
}

// Binary finds versitygw (PATH, then $HOME/.cache/pipec-tools/bin), and
// skips the test when it is missing, or fails it under PIPEC_REQUIRE_S3=1.
func Binary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cache", "pipec-tools", "bin", "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	msg := "versitygw is not installed (GOBIN=$HOME/.cache/pipec-tools/bin go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)"
	if os.Getenv("PIPEC_REQUIRE_S3") == "1" {
		t.Fatal(msg + "; PIPEC_REQUIRE_S3=1")
	}
	t.Skip(msg)
	return ""
}

// Start starts a server for the test, with one bucket per name in buckets,
// and sets the test's environment (t.Setenv) so that objstore clients built
// in this process use it. It is stopped when the test ends.
func Start(t testing.TB, buckets ...string) *Server {
	t.Helper()
	s := &Server{bin: Binary(t), Dir: t.TempDir(), t: t}
	for try := 1; ; try++ {
		// A port free a moment ago may be taken by another process (the
		// server of another package's test) before this one binds it.
		s.port = freePort(t)
		if s.start() {
			break
		}
		if try == 5 {
			t.Fatalf("versitygw did not listen on a free port in %d tries: %s", try, s.log())
		}
	}
	t.Cleanup(s.Stop)
	s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(s.port)
	s.Env = []string{"AWS_ENDPOINT_URL=" + s.Endpoint, "AWS_ACCESS_KEY_ID=" + AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + SecretKey, "AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=" + filepath.Join(s.Dir, ".aws-config"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(s.Dir, ".aws-credentials")}
	for _, kv := range s.Env {
		k, v, _ := cutEq(kv)
		t.Setenv(k, v)
	}
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_SESSION_TOKEN", "")
	c := s.Client()
	for _, b := range buckets {
		if err := c.CreateBucket(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func cutEq(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// Client is an objstore client of the server (built from the test's
// environment).
func (s *Server) Client() *objstore.Client {
	s.t.Helper()
	c, err := objstore.New(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// start starts versitygw on s.port and waits until it listens there
// (listensOn), and says false when it exited without (the port was taken
// meanwhile): a dial alone may reach another process on the port.
func (s *Server) start() bool {
	s.t.Helper()
	data := filepath.Join(s.Dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		s.t.Fatal(err)
	}
	log, err := os.OpenFile(filepath.Join(s.Dir, "versitygw.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(s.bin, "--access", AccessKey, "--secret", SecretKey, "--port", fmt.Sprintf("127.0.0.1:%d", s.port),
		"posix", data)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd = cmd
	pid := cmd.Process.Pid
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if listensOn(pid, s.port) {
			return true
		}
		var ws syscall.WaitStatus
		if p, _ := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); p == pid {
			s.cmd = nil // exited, and reaped
			return false
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("versitygw did not listen on port %d: %s", s.port, s.log())
		}
	}
}

func (s *Server) log() []byte {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "versitygw.log"))
	return b
}

// listensOn reports whether process pid holds a TCP socket listening on
// port (IPv4): a socket of /proc/net/tcp in state LISTEN whose inode is
// one of the process's descriptors.
func listensOn(pid, port int) bool {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false
	}
	want := fmt.Sprintf(":%04X", port)
	sockets := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 9 && strings.HasSuffix(f[1], want) && f[3] == "0A" {
			sockets["socket:["+f[9]+"]"] = true
		}
	}
	if len(sockets) == 0 {
		return false
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && sockets[l] {
			return true
		}
	}
	return false
}

// Stop stops the server (idempotent).
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_, _ = s.cmd.Process.Wait()
	s.cmd = nil
}

// Pause stops the server (SIGSTOP): its connections stay open and nothing
// answers on them, as clients see a hung server. Resume resumes it. It
// returns once every thread of the server is stopped: a thread running
// when the signal came answered a request sent right after it (seen once
// in CI).
func (s *Server) Pause() {
	s.t.Helper()
	s.signal(syscall.SIGSTOP)
	if !proctree.WaitStopped([]int{s.cmd.Process.Pid}, 10*time.Second) {
		s.t.Fatal("versitygw did not stop on SIGSTOP")
	}
}

// Resume resumes a server that Pause stopped.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := syscall.Kill(-s.cmd.Process.Pid, sig); err != nil {
		s.t.Fatal(err)
	}
}

// Restart starts the server again on the same port and folder.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if !s.start() {
		s.t.Fatalf("versitygw did not listen on port %d again: %s", s.port, s.log())
	}
}

// Data is the folder holding the buckets.
func (s *Server) Data() string { return filepath.Join(s.Dir, "data") }

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
