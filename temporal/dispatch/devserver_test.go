package dispatch_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"

	"github.com/pipec/pipec/cli"
	"github.com/pipec/pipec/internal/proctree"
)

// A Temporal server in its own process, its history in an SQLite file: what
// `temporal server start-dev --db-filename FILE` runs (the same SQLite
// persistence, one history shard), so a test can kill it and start it again
// on the same file. The process is this test binary itself, run with
// PIPEC_TEST_TEMPORAL_DB set (init below): no second build of the server.

const devNamespace = "pipec-test"

func init() {
	db := os.Getenv("PIPEC_TEST_TEMPORAL_DB")
	if db == "" {
		return
	}
	port, _ := strconv.Atoi(os.Getenv("PIPEC_TEST_TEMPORAL_PORT"))
	if err := serveDev(db, port); err != nil {
		fmt.Fprintln(os.Stderr, "temporal server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveDev runs the server until SIGTERM or SIGINT.
func serveDev(db string, port int) error {
	sqlCfg := &config.SQL{PluginName: sqliteplugin.PluginName, DatabaseName: db,
		ConnectAttributes: map[string]string{"mode": "rwc"}}
	if _, err := os.Stat(db); os.IsNotExist(err) {
		if err := sqlite.SetupSchema(sqlCfg); err != nil {
			return fmt.Errorf("schema: %w", err)
		}
	}
	ns, err := sqlite.NewNamespaceConfig("active", devNamespace, false, nil)
	if err != nil {
		return err
	}
	if err := sqlite.CreateNamespaces(sqlCfg, ns); err != nil {
		return err
	}
	host := "127.0.0.1"
	// Every port derives from the frontend's, so the server started again
	// has the addresses its membership records (in the database) name:
	// none of them points at a process that is gone.
	svc := func(i int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: port + i, MembershipPort: port + 4 + i, BindOnIP: host}}
	}
	cfg := &config.Config{
		Global: config.Global{Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: host}},
		Persistence: config.Persistence{DefaultStore: sqliteplugin.PluginName, VisibilityStore: sqliteplugin.PluginName,
			NumHistoryShards: 1, DataStores: map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sqlCfg}}},
		ClusterMetadata: &cluster.Config{FailoverVersionIncrement: 10, MasterClusterName: "active", CurrentClusterName: "active",
			ClusterInformation: map[string]cluster.ClusterInformation{"active": {Enabled: true, InitialFailoverVersion: 1,
				RPCAddress: fmt.Sprintf("%s:%d", host, port)}}},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services:            map[string]config.Service{"frontend": svc(0), "history": svc(1), "matching": svc(2), "worker": svc(3)},
		Archival:            config.Archival{History: config.HistoryArchival{State: "disabled"}, Visibility: config.VisibilityArchival{State: "disabled"}},
		PublicClient:        config.PublicClient{HostPort: fmt.Sprintf("%s:%d", host, port)},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History: config.HistoryArchivalNamespaceDefaults{State: "disabled"}, Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"}}},
	}
	s, err := temporal.NewServer(temporal.WithConfig(cfg), temporal.ForServices(temporal.DefaultServices),
		temporal.WithLogger(log.NewNoopLogger()))
	if err != nil {
		return err
	}
	if err := s.Start(); err != nil {
		return err
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	return s.Stop()
}

// devServer is a Temporal server process on an SQLite file.
type devServer struct {
	t    testing.TB
	db   string
	port int
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	out  strings.Builder
}

// freePort is a port p with p to p+7 free (the server's eight ports),
// below the kernel's range of ephemeral ports: the server must bind the
// same ports again when it restarts, and a port from that range (what
// listening on port 0 gives) may meanwhile be taken as the local port of
// any outgoing connection, the workers' own dials to the server among them
// ("bind: address already in use" in a CI run).
func freePort(t testing.TB) int {
	t.Helper()
	low := 32768 // Linux's default, when the range cannot be read
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	first := 10000
	if low-8 <= first {
		t.Fatalf("no ports below the ephemeral range (from %d)", low)
	}
	for range 200 {
		p := first + rand.IntN(low-8-first)
		free := true
		for i := 0; i < 8 && free; i++ {
			if m, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+i)); err != nil {
				free = false
			} else {
				m.Close()
			}
		}
		if free {
			return p
		}
	}
	t.Fatal("no 8 consecutive free ports below the ephemeral range")
	return 0
}

func startDevServer(t testing.TB, db string, port int) *devServer {
	t.Helper()
	s := &devServer{t: t, db: db, port: port}
	s.start()
	t.Cleanup(func() { s.kill() })
	return s
}

func (s *devServer) hostPort() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// start runs the server process and waits until it serves. With
// PIPEC_TEMPORAL_CLI naming the Temporal CLI, the process is the user's
// `temporal server start-dev --db-filename FILE` itself; it picks fresh
// ports for its internal services at each start, which a restart must
// ride too.
func (s *devServer) start() {
	s.t.Helper()
	if cli := os.Getenv("PIPEC_TEMPORAL_CLI"); cli != "" {
		s.startCLI(cli)
		return
	}
	s.cmd = exec.Command(os.Args[0], "-test.run", "^$")
	s.cmd.Env = append(os.Environ(), "PIPEC_TEST_TEMPORAL_DB="+s.db, "PIPEC_TEST_TEMPORAL_PORT="+strconv.Itoa(s.port))
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	s.cmd.Stderr = &lockedWriter{mu: &s.mu, b: &s.out}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.done = make(chan struct{})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
			}
		}
	}()
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	select {
	case <-ready:
	case <-s.done:
		s.t.Fatalf("the Temporal server exited before serving:\n%s", s.output())
	case <-time.After(2 * time.Minute):
		s.t.Fatalf("the Temporal server did not start:\n%s", s.output())
	}
}

// startCLI runs `temporal server start-dev` on s's file and frontend port
// (its HTTP and metrics ports the next two) and waits until the frontend
// answers a health check.
func (s *devServer) startCLI(bin string) {
	s.t.Helper()
	s.cmd = exec.Command(bin, "server", "start-dev", "--db-filename", s.db, "--ip", "127.0.0.1",
		"--port", strconv.Itoa(s.port), "--http-port", strconv.Itoa(s.port+1), "--metrics-port", strconv.Itoa(s.port+2),
		"--headless", "--namespace", devNamespace, "--log-level", "error")
	w := &lockedWriter{mu: &s.mu, b: &s.out}
	s.cmd.Stdout, s.cmd.Stderr = w, w
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		select {
		case <-s.done:
			s.t.Fatalf("temporal server start-dev exited before serving:\n%s", s.output())
		default:
		}
		c, err := client.Dial(client.Options{HostPort: s.hostPort(), Namespace: devNamespace})
		if err == nil {
			_, err = c.CheckHealth(context.Background(), &client.CheckHealthRequest{})
			c.Close()
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("temporal server start-dev did not serve within 2 minutes: %v\n%s", err, s.output())
		}
	}
}

// kill ends the server process with SIGKILL: a crash, nothing flushed on
// the way out beyond what it committed.
func (s *devServer) kill() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

// freeze stops the server process (SIGSTOP) and returns once none of its
// threads runs: its connections stay open, and nothing answers on them.
func (s *devServer) freeze() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(s.thaw) // a test that fails while it is frozen
	if !proctree.WaitStopped([]int{s.cmd.Process.Pid}, 10*time.Second) {
		s.t.Fatal("the Temporal server did not stop on SIGSTOP")
	}
}

// thaw resumes the server freeze stopped.
func (s *devServer) thaw() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

func (s *devServer) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// newEnvOnServer is newEnv on a server process (no in-process server).
func newEnvOnServer(t testing.TB, s *devServer, spec string, files map[string]string) *env {
	t.Helper()
	needServer(t)
	e := &env{t: t, dir: t.TempDir()}
	e.engine = "temporal://" + s.hostPort() + "?namespace=" + devNamespace
	c, err := client.Dial(client.Options{HostPort: s.hostPort(), Namespace: devNamespace})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e.c = c
	e.url = filepath.Join(e.dir, "state.db")
	e.arts = filepath.Join(e.dir, "artifacts")
	if err := os.Mkdir(e.arts, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "pipeline.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(e.dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sh, err := cli.OpenShared(context.Background(), e.url)
	if err != nil {
		t.Fatal(err)
	}
	e.st = sh.Store
	t.Cleanup(func() { sh.Store.Close() })
	return e
}
