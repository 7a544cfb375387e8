package exec

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func env() []string { return BaseEnv(os.Environ()) }

func script(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestExitCodeOutputAndDir(t *testing.T) {
	dir := t.TempDir()
	script(t, dir, "task.sh", `echo "in $(basename "$PWD") with $GREETING"; echo oops >&2; exit 7`)
	log := filepath.Join(dir, "logs", "1.log")
	p, err := Start(context.Background(), Spec{Argv: []string{"./task.sh"}, Dir: dir,
		Env: append(env(), "GREETING=hello"), LogPath: log})
	if err != nil {
		t.Fatal(err)
	}
	r := p.Wait()
	if r.ExitCode != 7 || r.Success() || r.Signal != 0 || r.TimedOut {
		t.Fatalf("result = %+v", r)
	}
	want := "in " + filepath.Base(dir) + " with hello\noops\n"
	if r.Tail != want {
		t.Errorf("tail = %q, want %q", r.Tail, want)
	}
	b, err := os.ReadFile(log)
	if err != nil || string(b) != want {
		t.Errorf("log = %q, %v", b, err)
	}
}

func TestNoShell(t *testing.T) {
	dir := t.TempDir()
	p, err := Start(context.Background(), Spec{Argv: []string{"echo", "$HOME", "a;b"}, Dir: dir, Env: env()})
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Wait(); r.Tail != "$HOME a;b\n" || !r.Success() {
		t.Errorf("result = %+v", r)
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "plain.sh"), []byte("echo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{{}, {"./missing.sh"}, {"./plain.sh"}, {"no-such-command-pipec"}} {
		if _, err := Start(context.Background(), Spec{Argv: argv, Dir: dir, Env: env()}); err == nil {
			t.Errorf("Start(%q) succeeded", argv)
		}
	}
}

func TestTimeoutKillsTheGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	// The grandchild ignores nothing but would outlive its parent if only the
	// parent were killed.
	script(t, dir, "task.sh", `sleep 30 & echo $! > `+pidFile+`; wait`)
	p, err := Start(context.Background(), Spec{Argv: []string{"./task.sh"}, Dir: dir, Env: env(),
		Timeout: 200 * time.Millisecond, KillGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r := p.Wait()
	if !r.TimedOut || r.Success() {
		t.Fatalf("result = %+v", r)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// The grandchild got SIGTERM with its group; give the kernel a moment to reap.
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d still alive after the group was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStopAStoppedProcess(t *testing.T) {
	dir := t.TempDir()
	script(t, dir, "task.sh", `trap 'echo term; exit 143' TERM; while :; do sleep 0.05; done`)
	p, err := Start(context.Background(), Spec{Argv: []string{"./task.sh"}, Dir: dir, Env: env(), KillGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	r := p.Wait()
	if !r.Stopped || r.Success() {
		t.Fatalf("result = %+v", r)
	}
}

func TestContextCancelStops(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := Start(ctx, Spec{Argv: []string{"sleep", "30"}, Dir: dir, Env: env(), KillGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if r := p.Wait(); !r.Stopped || r.Signal != syscall.SIGTERM {
		t.Fatalf("result = %+v", r)
	}
}

func TestKilledBySomeoneElse(t *testing.T) {
	dir := t.TempDir()
	p, err := Start(context.Background(), Spec{Argv: []string{"sleep", "30"}, Dir: dir, Env: env()})
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := p.Wait()
	if r.Signal != syscall.SIGKILL || r.Stopped || r.TimedOut || r.ExitCode != -1 {
		t.Fatalf("result = %+v", r)
	}
}

func TestRedactionInLogAndTail(t *testing.T) {
	dir := t.TempDir()
	// The secret is printed in two pieces, one write each, so the redactor
	// must join writes to catch it.
	script(t, dir, "task.sh", `printf 'token=s3cr'; sleep 0.1; printf 'etValue and again s3cretValue\n'; echo "env: $PASSWORD"`)
	log := filepath.Join(dir, "a.log")
	p, err := Start(context.Background(), Spec{Argv: []string{"./task.sh"}, Dir: dir,
		Env: append(env(), "PASSWORD=s3cretValue"), LogPath: log, Redact: []string{"s3cretValue", ""}})
	if err != nil {
		t.Fatal(err)
	}
	r := p.Wait()
	want := "token=*** and again ***\nenv: ***\n"
	if r.Tail != want {
		t.Errorf("tail = %q, want %q", r.Tail, want)
	}
	if b, _ := os.ReadFile(log); string(b) != want {
		t.Errorf("log = %q, want %q", b, want)
	}
}

func TestRedactor(t *testing.T) {
	in := "aaXYZbbXYbcXYZ"
	for split := 0; split <= len(in); split++ {
		var out bytes.Buffer
		r := newRedactor(&out, []string{"XYZ", "XY"})
		r.Write([]byte(in[:split]))
		r.Write([]byte(in[split:]))
		r.Flush()
		// "XY" at the end of the first write may be the start of "XYZ": the
		// longest secret wins when it completes, else the shorter one.
		if got := out.String(); got != "aa***bb***bc***" {
			t.Errorf("split %d: %q", split, got)
		}
	}
	if got := Redact("pw=hunter2 hunter", []string{"hunter", "hunter2"}); got != "pw=*** ***" {
		t.Errorf("Redact = %q", got)
	}
}

func TestTailAndLastLines(t *testing.T) {
	tl := newTail(5)
	tl.Write([]byte("abc"))
	tl.Write([]byte("defg"))
	if tl.String() != "cdefg" {
		t.Errorf("tail = %q", tl.String())
	}
	tl.Write([]byte("0123456789"))
	if tl.String() != "56789" {
		t.Errorf("tail = %q", tl.String())
	}
	if got := LastLines("a\nb\nc\nd\n", 2, 100); got != "c\nd" {
		t.Errorf("LastLines = %q", got)
	}
	if got := LastLines("line one\nline two\n", 10, 6); got != "ne two" {
		t.Errorf("LastLines = %q", got)
	}
}

func TestBaseEnv(t *testing.T) {
	got := BaseEnv([]string{"PATH=/bin", "AWS_SECRET_ACCESS_KEY=x", "LC_ALL=C", "HOME=/h", "GITHUB_TOKEN=y", "broken"})
	want := []string{"PATH=/bin", "LC_ALL=C", "HOME=/h"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("BaseEnv = %q", got)
	}
	e := Env{}.Parse([]string{"B=2", "A=1", "B=3"})
	if l := e.List(); strings.Join(l, ",") != "A=1,B=3" {
		t.Errorf("Env.List = %q", l)
	}
}

func TestRedactorBoundaries(t *testing.T) {
	r := NewRedactor([]string{`pa"ss<1>`, "", "hunter2"})
	if got := r.String(`x pa"ss<1> hunter2`); got != "x *** ***" {
		t.Errorf("String = %q", got)
	}
	// JSON escapes the quote and the angle brackets: both forms are masked.
	if got := string(r.JSON([]byte(`{"a":"pa\"ss\u003c1\u003e","b":"hunter2"}`))); got != `{"a":"***","b":"***"}` {
		t.Errorf("JSON = %s", got)
	}
	v := r.Value(map[string]any{"s": "hunter2!", "n": 3, "l": []any{"a hunter2"}, "ss": []string{"hunter2"}})
	m := v.(map[string]any)
	if m["s"] != "***!" || m["n"] != 3 || m["l"].([]any)[0] != "a ***" || m["ss"].([]string)[0] != "***" {
		t.Errorf("Value = %#v", v)
	}
	var none *Redactor
	if none.String("hunter2") != "hunter2" || len(none.Secrets()) != 0 {
		t.Error("a nil Redactor masks")
	}
}
