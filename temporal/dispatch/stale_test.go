package dispatch_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"

	"github.com/pipec/pipec/internal/pgtest"
	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/store"
)

// A visit Temporal gave up on does not touch the visit that took its task
// over. w1 is stopped (SIGSTOP) after its visit's activity started and
// before the visit read the task's attempts (the test build's pause), past
// the heartbeat timeout: Temporal gives the visit up and the task runs on
// w2. w1 reaches Temporal through a proxy, which the test cuts before
// resuming w1 (a partition: what w1 sends is held, nothing answers), so
// w1's heartbeats cannot tell it it was given up before its visit goes on.
// The visit, on the same machine as w2, finds w2's attempt unfinished: it
// must not end it as an orphan of its own. It asks Temporal first, gets no
// answer within the timeout, and stops. w2's attempt succeeds, and so does
// the run.
func TestStaleVisitLeavesTheTakeoverAlone(t *testing.T) {
	pg := pgtest.Start(t)
	e := newEnvAt(t, scenario.Stale, map[string]string{"load.sh": scenario.StaleLoad}, pg.NewSchema(t))
	p := startProxy(t, e.ts.GetFrontendHostPort())
	w1 := e.workerEnv(bin, []string{"PIPEC_TEST_PAUSE_TASK=load"}, "w1",
		"--engine", "temporal://"+p.addr()+"?namespace="+e.ts.GetDefaultNamespace())
	_, run, _ := e.submit("2024-01-01", false, "--heartbeat", "1s")
	e.waitFile("paused")
	w1.Signal(t, syscall.SIGSTOP)
	e.worker("w2")
	// The workflow tasks and the lost visit's judging that w1's polls took
	// before it stopped time out first (10 s and 5 s each).
	for deadline := time.Now().Add(2 * time.Minute); e.lines("ran", "w2 start") == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			w1.Signal(t, syscall.SIGCONT)
			t.Fatal("the task never started on w2")
		}
	}
	p.cut()
	if err := os.WriteFile(filepath.Join(e.dir, "resume"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w1.Signal(t, syscall.SIGCONT)
	if r := e.until(run); r.State != store.RunSucceeded {
		for _, a := range e.attempts(run, "load") {
			t.Logf("attempt %d on %s: %s %s %s", a.Number, a.Worker, a.State, a.Class, a.ErrorTail)
		}
		evs, _ := e.st.Events(context.Background(), run)
		for _, ev := range evs {
			t.Logf("event %s %s %s", ev.Kind, ev.Task, ev.Payload)
		}
		it := e.c.GetWorkflowHistory(context.Background(), "pipec/stale/2024-01-01", "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				break
			}
			t.Logf("history %d %s %s", ev.GetEventId(), ev.GetEventTime().AsTime().Format("15:04:05.000"), ev.GetEventType())
		}
		t.Fatalf("run %s, want succeeded", r.State)
	}
	e.replay("stale", "2024-01-01", "stale-visit")
	if err := scenario.CheckTakeover(e.dir, "w1", "w2", e.attempts(run, "load")); err != nil {
		t.Error(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(w1.Output(), "load: stopped here: Temporal no longer waits"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("w1 never said its visit was given up:\n%s", w1.Output())
		}
	}
}

// proxy forwards TCP connections to a server until it is cut; then what
// either side sends is held, unanswered, as in a partition that drops
// packets (no connection is refused or reset).
type proxy struct {
	l      net.Listener
	cutOff chan struct{}
	once   sync.Once
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, cutOff: make(chan struct{})}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); s.Close() })
			go p.pipe(s, c)
			go p.pipe(c, s)
		}
	}()
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) cut() { p.once.Do(func() { close(p.cutOff) }) }

// pipe copies from src to dst until the proxy is cut, then drops.
func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.cutOff:
			if err != nil {
				return
			}
			continue
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
