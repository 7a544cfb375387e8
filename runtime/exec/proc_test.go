//go:build linux

package exec

import (
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gone reports whether pid no longer runs (exited: reaped or a zombie).
func gone(pid int) bool {
	st, err := readStat(pid)
	return err != nil || st.state == 'Z'
}

// waitGoneT fails the test if pid still runs after a generous bound (the
// kernel delivers SIGKILL asynchronously; this is not a timing assertion).
func waitGoneT(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A task's leftovers end when its main process exits: a background sleep
// and a child that keeps appending to the output die, so the output the
// audit reads no longer grows.
func TestLeftoversEndWithTheMainProcess(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.csv")
	script(t, dir, "task.sh", `sleep 300 & echo $! > sleep.pid
(while :; do echo row >> `+out+`; sleep 0.01; done) & echo $! > appender.pid
sleep 0.1; exit 0`)
	p, err := Start(context.Background(), Spec{Argv: []string{"./task.sh"}, Dir: dir, Env: env()})
	if err != nil {
		t.Fatal(err)
	}
	r := p.Wait()
	if !r.Success() || !r.Leftovers {
		t.Fatalf("result = %+v", r)
	}
	sleepPID, appender := readPID(t, filepath.Join(dir, "sleep.pid")), readPID(t, filepath.Join(dir, "appender.pid"))
	waitGoneT(t, sleepPID)
	waitGoneT(t, appender)
	before, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // several appender periods
	after, _ := os.ReadFile(out)
	if len(after) != len(before) {
		t.Errorf("the output grew after the task ended: %d -> %d bytes", len(before), len(after))
	}
}

func TestTimeoutSaysAfterHowLong(t *testing.T) {
	dir := t.TempDir()
	p, err := Start(context.Background(), Spec{Argv: []string{"sleep", "30"}, Dir: dir, Env: env(),
		Timeout: 200 * time.Millisecond, KillGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Wait().Describe(); got != "timed out after 200ms" {
		t.Errorf("Describe = %q", got)
	}
	for d, want := range map[time.Duration]string{20 * time.Minute: "20m", time.Hour: "1h", 90 * time.Second: "1m30s",
		36*time.Hour + time.Second: "36h0m1s"} {
		if got := ShortDuration(d); got != want {
			t.Errorf("ShortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestIdentityOfAStartedProcess(t *testing.T) {
	for _, later := range []bool{false, true} {
		dir := t.TempDir()
		p, err := Start(context.Background(), Spec{Argv: []string{"sleep", "30"}, Dir: dir, Env: env(), KillGrace: 100 * time.Millisecond,
			IdentifyLater: later})
		if err != nil {
			t.Fatal(err)
		}
		id := p.Identity()
		st, err := readStat(p.PID())
		if err != nil {
			t.Fatal(err)
		}
		host, _ := os.Hostname()
		boot, _ := BootID()
		if !id.Known() || id.PID != p.PID() || id.PGID != p.PID() || id.Start != st.start || id.Host != host || id.Boot != boot || boot == "" {
			t.Errorf("IdentifyLater %v: identity = %+v, stat %+v", later, id, st)
		}
		p.Stop()
		p.Wait()
		if again := p.Identity(); again != id {
			t.Errorf("IdentifyLater %v: identity once it ended = %+v, want %+v as first read", later, again, id)
		}
	}
}

// A process identified late that ended and was reaped before anyone asked
// has its pid and group only: its pid may name another process by then.
func TestIdentityAfterTheEnd(t *testing.T) {
	p, err := Start(context.Background(), Spec{Argv: []string{"true"}, Dir: t.TempDir(), Env: env(), IdentifyLater: true})
	if err != nil {
		t.Fatal(err)
	}
	p.Wait()
	if id := p.Identity(); id.Known() || id.PID != p.PID() || id.PGID != p.PID() || id.Start != 0 {
		t.Errorf("identity of a reaped process = %+v, want pid %d and group only", id, p.PID())
	}
}

// orphan starts a process the test does not wait for, as a task left behind
// by a pipec killed with -9: its own group, the attempt's markers in its
// environment.
func orphan(t *testing.T, dir, body string, extraEnv ...string) Identity {
	t.Helper()
	script(t, dir, "orphan.sh", body)
	cmd := osexec.Command("./orphan.sh")
	cmd.Dir = dir
	cmd.Env = append(env(), extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait() // reap it when it dies, as init would
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	id, err := Identify(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestEndOrphansVerifiesStartTime(t *testing.T) {
	dir := t.TempDir()
	id := orphan(t, dir, "exec sleep 300")
	// Same pid, another start time: a reused pid, not the attempt's process.
	wrong := id
	wrong.Start++
	res, err := EndOrphans(context.Background(), []Target{{ID: wrong}}, time.Second)
	if err != nil || res[0].Found != 0 || gone(id.PID) {
		t.Fatalf("a process with another start time was touched: %+v, %v", res, err)
	}
	res, err = EndOrphans(context.Background(), []Target{{ID: id}}, time.Second)
	if err != nil || res[0].Found != 1 || res[0].Killed != 0 {
		t.Fatalf("EndOrphans = %+v, %v", res, err)
	}
	waitGoneT(t, id.PID)
}

func TestEndOrphansKillsAfterGraceAndFindsChildren(t *testing.T) {
	dir := t.TempDir()
	// The leader ignores SIGTERM; its child (same group) is found through
	// the group of the verified leader.
	id := orphan(t, dir, `trap '' TERM; sleep 300 & echo $! > child.pid; while :; do sleep 0.05; done`)
	child := readPID(t, filepath.Join(dir, "child.pid"))
	res, err := EndOrphans(context.Background(), []Target{{ID: id}}, 200*time.Millisecond)
	if err != nil || res[0].Found < 2 || res[0].Killed < 1 {
		t.Fatalf("EndOrphans = %+v, %v", res, err)
	}
	waitGoneT(t, id.PID)
	waitGoneT(t, child)
}

func TestEndOrphansByMarker(t *testing.T) {
	dir := t.TempDir()
	// pipec died before it recorded the pid: only host, boot and the
	// attempt's markers are known.
	id := orphan(t, dir, "exec sleep 300", "PIPEC_RUN_ID=p/2024-01-01/r1", "PIPEC_TOKEN=1000000007")
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	other := Target{ID: self, Marker: Marker{"PIPEC_RUN_ID=p/2024-01-01/r1", "PIPEC_TOKEN=1000000008"}}
	mine := Target{ID: self, Marker: Marker{"PIPEC_RUN_ID=p/2024-01-01/r1", "PIPEC_TOKEN=1000000007"}}
	res, err := EndOrphans(context.Background(), []Target{other, mine}, time.Second)
	if err != nil || res[0].Found != 0 || res[1].Found != 1 {
		t.Fatalf("EndOrphans = %+v, %v", res, err)
	}
	waitGoneT(t, id.PID)
}

// A marked process in the middle of an execve shows no environment for a
// moment; it is found all the same. This orphan execs itself without end, so
// the scans land in that moment now and then: without reading a blank
// environment again, one scan in ten or twenty missed it.
func TestEndOrphansByMarkerWhileExecing(t *testing.T) {
	dir := t.TempDir()
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	marker := Marker{"PIPEC_RUN_ID=p/2024-01-01/r1", "PIPEC_TOKEN=1000000009"}
	for i := range 100 {
		id := orphan(t, dir, "exec ./orphan.sh", marker...)
		res, err := EndOrphans(context.Background(), []Target{{ID: self, Marker: marker}}, time.Second)
		if err != nil || res[0].Found != 1 {
			t.Fatalf("scan %d: EndOrphans = %+v, %v", i, res, err)
		}
		waitGoneT(t, id.PID)
	}
}

func TestEndOrphansOfAnotherBootOrHost(t *testing.T) {
	dir := t.TempDir()
	id := orphan(t, dir, "exec sleep 300")
	reboot, elsewhere := id, id
	reboot.Boot = "00000000-0000-0000-0000-000000000000"
	elsewhere.Host = "another-host"
	res, err := EndOrphans(context.Background(), []Target{{ID: reboot}, {ID: elsewhere}}, time.Second)
	if err != nil || !res[0].Rebooted || !res[1].Elsewhere || gone(id.PID) {
		t.Fatalf("EndOrphans = %+v, %v", res, err)
	}
}
