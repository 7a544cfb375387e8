package webview_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

// The browser tests run real pipec processes (the binary built here), make
// real runs with real signals, and load their pages in headless Chromium
// (Debian's chromium package). Without a browser they skip, unless
// PIPEC_REQUIRE_CHROMIUM=1 (CI), and then fail. PIPEC_UI_SCREENSHOT_DIR
// keeps the screenshots.

const uiSecret = "sekrit-VALUE-4711"

const demoHCL = `
pipeline "demo" {
  code_version = "v1 <b>bold</b> \u001b[31m"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  error "transient" {
    exit_codes = [75]
  }
  retry "quick" {
    max_attempts = 3
    initial      = "10ms"
    jitter       = "full"
    on           = ["transient"]
  }
  task "flaky" {
    command    = ["./flaky.sh"]
    outputs    = ["raw"]
    retry      = "quick"
    timeout    = "30s"
    secret_env = ["API_KEY"]
  }
  task "write" {
    command = ["./write.sh"]
    inputs  = ["raw"]
    outputs = ["part"]
    retry   = "quick"
    timeout = "30s"
    heartbeat {
      every = "50ms"
      lease = "1s"
    }
  }
  check "part_ok" {
    input         = "part"
    row_count_min = 10
  }
  sink "out" {
    type    = "directory"
    path    = "out"
    fencing = "token"
  }
  publish "part_out" {
    artifact = "part"
    sink     = "out"
  }
}
`

// flaky fails its first attempt (exit 75, a transient error) with markup,
// a control character and the secret in its output, then succeeds.
const flakySh = `#!/bin/sh
set -eu
if [ "$PIPEC_ATTEMPT" = 1 ]; then
  printf 'connection reset <script>alert(1)</script> key=%s \033[31m\n' "$API_KEY" >&2
  exit 75
fi
printf 'id\n1\n' > "$PIPEC_OUTPUT_raw/raw.csv"
`

// write's attempt 1 announces its pid halfway and waits for the test's
// go-ahead while touching its heartbeat: only a SIGSTOP expires its lease.
const writeSh = `#!/bin/sh
set -eu
out="$PIPEC_OUTPUT_part/part.csv"
echo "id,attempt" > "$out"
i=0
while [ $i -lt 10 ]; do echo "$i,$PIPEC_ATTEMPT" >> "$out"; i=$((i+1)); done
touch "$PIPEC_HEARTBEAT"
if [ "$PIPEC_ATTEMPT" = 1 ]; then
  echo $$ > half.tmp && mv half.tmp half
  while [ ! -e go ]; do touch "$PIPEC_HEARTBEAT"; sleep 0.02; done
fi
echo "10,$PIPEC_ATTEMPT" >> "$out"
`

const handoffHCL = `
pipeline "handoff" {
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  error "run_error" {
    exit_codes = [1]
  }
  retry "once" {
    max_attempts = 1
    initial      = "10ms"
    on           = ["run_error"]
  }
  task "move" {
    command = ["./move.sh"]
    retry   = "once"
    timeout = "1m"
    failover {
      per_worker = 1
      global     = 2
    }
  }
}
`

// move fails on the first worker that runs it and succeeds on the other.
const moveSh = `#!/bin/sh
if [ ! -e first ]; then echo "$PIPEC_WORKER" > first; fi
if [ "$(cat first)" = "$PIPEC_WORKER" ]; then echo "run error on $PIPEC_WORKER" >&2; exit 1; fi
`

func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("PIPEC_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("chromium is missing and PIPEC_REQUIRE_CHROMIUM=1 (apt-get install chromium)")
	}
	t.Skip("chromium is missing: apt-get install chromium (PIPEC_REQUIRE_CHROMIUM=1 makes this a failure)")
	return ""
}

// TestMain removes the pipec binary the browser tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// pipecBin builds pipec once per test binary.
func pipecBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pipec-ui-bin")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "pipec")
		out, err := exec.Command("go", "build", "-o", builtBin, "github.com/pipec/pipec/cmd/pipec").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %v", what, d)
		}
	}
}

// browse runs headless Chromium with args and the URL, networking
// disabled for anything but loopback, and returns its stdout.
func browse(t *testing.T, browser string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--user-data-dir=" + t.TempDir(),
		// Every request beyond loopback goes to a proxy that is not there:
		// the network is off (Chromium bypasses proxies for loopback).
		"--proxy-server=http://127.0.0.1:9"}
	cmd := exec.CommandContext(ctx, browser, append(base, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

func keepScreenshot(t *testing.T, src, name string) {
	t.Helper()
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	dir := os.Getenv("PIPEC_UI_SCREENSHOT_DIR")
	if dir == "" {
		return
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot kept at %s", filepath.Join(dir, name))
}

// TestBrowserRealRun: a real pipec run with a retried task and a relaunch
// after SIGSTOP whose late publish is fenced, and a run handed to two real
// workers that fails over from one to the other; pipec ui serves them and
// Chromium loads the pages; pipec report's file opens with the network off.
func TestBrowserRealRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pipec and runs a browser")
	}
	browser := chromium(t)
	bin := pipecBin(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"demo.hcl": demoHCL, "flaky.sh": flakySh, "write.sh": writeSh,
		"handoff.hcl": handoffHCL, "move.sh": moveSh})
	state := filepath.Join(dir, ".pipec", "state.db")
	env := append(os.Environ(), "PIPEC_STATE=", "API_KEY="+uiSecret, "NO_COLOR=1")

	// The local run: SIGSTOP write#1 halfway, let write#2 publish, resume.
	run := exec.Command(bin, "run", "demo.hcl", "--interval", "2024-01-01")
	run.Dir, run.Env = dir, env
	var runOut strings.Builder
	run.Stdout, run.Stderr = &runOut, &runOut
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- run.Wait() }()
	var pid int
	waitFor(t, "write#1 halfway", 60*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "half"))
		if err == nil {
			_, err = fmt.Sscan(string(b), &pid)
		}
		return err == nil
	})
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			syscall.Kill(-pid, syscall.SIGCONT)
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "write#2's publish", 60*time.Second, func() bool {
		_, err := os.Readlink(filepath.Join(dir, "out", "2024-01-01"))
		return err == nil
	})
	// pipec ui on a free loopback port, started while the run runs: its
	// page is live, write#1 is unknown and write#2 published.
	ui := exec.Command(bin, "ui", "--state", state, "--spec", "demo.hcl", "--listen", "127.0.0.1:0")
	ui.Dir, ui.Env = dir, env
	uiOut, err := ui.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	ui.Stderr = io.Discard
	if err := ui.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { ui.Process.Signal(syscall.SIGTERM); ui.Wait() }()
	line, err := bufio.NewReader(uiOut).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`http://[0-9.:]+/`).FindString(line)
	if m == "" {
		t.Fatalf("pipec ui said %q", line)
	}
	base := strings.TrimSuffix(m, "/")

	const demoRun, handoffRun = "demo/2024-01-01/r1", "handoff/2024-01-01/r1"
	runURL := base + "/run?id=" + url.QueryEscape(demoRun)
	live := browse(t, browser, "--dump-dom", runURL)
	for _, want := range []string{`<span class="badge s-running">running</span>`, `var url = "/run/live?id=demo%2F2024-01-01%2Fr1`,
		`data-task="write" data-attempt="1"`, `data-state="unknown"`, `<g class="mark m-relaunch"`} {
		if !strings.Contains(live, want) {
			t.Errorf("the running run's page lacks %q", want)
		}
	}

	syscall.Kill(-pid, syscall.SIGCONT)
	stopped = false
	select {
	case err := <-runDone:
		if err != nil {
			t.Fatalf("pipec run: %v\n%s", err, runOut.String())
		}
	case <-time.After(90 * time.Second):
		run.Process.Kill()
		t.Fatalf("pipec run did not end\n%s", runOut.String())
	}
	if !strings.Contains(runOut.String(), "FENCED") {
		t.Fatalf("write#1's late publish was not fenced:\n%s", runOut.String())
	}

	// The submitted run: two workers, the task fails over from one to the other.
	var workers []*exec.Cmd
	for _, name := range []string{"w1", "w2"} {
		w := exec.Command(bin, "worker", "--state", state, "--name", name, "--workdir", filepath.Join(dir, "work-"+name), "--lease", "1s")
		w.Dir, w.Env = dir, env
		out, err := w.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		w.Stderr = w.Stdout
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		registered := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(out)
			once := sync.OnceFunc(func() { close(registered) })
			for sc.Scan() {
				if strings.Contains(sc.Text(), "registered") {
					once()
				}
			}
			once()
		}()
		select {
		case <-registered:
		case <-time.After(60 * time.Second):
			t.Fatalf("worker %s did not register", name)
		}
		workers = append(workers, w)
	}
	defer func() {
		for _, w := range workers {
			w.Process.Signal(syscall.SIGTERM)
			w.Wait()
		}
	}()
	sub := exec.Command(bin, "submit", "handoff.hcl", "--interval", "2024-01-01", "--state", state, "--wait", "--poll", "20ms")
	sub.Dir, sub.Env = dir, env
	if out, err := sub.CombinedOutput(); err != nil {
		t.Fatalf("pipec submit: %v\n%s", err, out)
	}

	st, err := sqlite.Open(context.Background(), state, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	atts, err := st.Attempts(context.Background(), demoRun)
	if err != nil || len(atts) != 4 {
		t.Fatalf("%s attempts %v, %v", demoRun, atts, err)
	}

	shots := t.TempDir()
	dom := browse(t, browser, "--dump-dom", runURL)
	checkRunDOM(t, "run page", dom, atts)
	png := filepath.Join(shots, "run.png")
	browse(t, browser, "--window-size=1280,800", "--hide-scrollbars", "--screenshot="+png, runURL)
	keepScreenshot(t, png, "run.png")
	phone := filepath.Join(shots, "run-phone.png")
	browse(t, browser, "--window-size=390,844", "--screenshot="+phone, runURL)
	keepScreenshot(t, phone, "run-phone.png")

	// The failover run: two bars on two workers, the failover marked.
	hatts, err := st.Attempts(context.Background(), handoffRun)
	if err != nil || len(hatts) != 2 || hatts[0].Worker == hatts[1].Worker {
		t.Fatalf("%s attempts %+v, %v", handoffRun, hatts, err)
	}
	hdom := browse(t, browser, "--dump-dom", base+"/run?id="+url.QueryEscape(handoffRun))
	for _, a := range hatts {
		if !strings.Contains(hdom, fmt.Sprintf(`data-attempt="%d" data-token="%d" data-worker="%s"`, a.Number, a.Token, a.Worker)) {
			t.Errorf("handoff page: no bar for move#%d on %s", a.Number, a.Worker)
		}
	}
	if !strings.Contains(hdom, `<g class="mark m-failover" data-kind="failover" data-attempt="1">`) {
		t.Error("handoff page: the failover is not marked")
	}
	hpng := filepath.Join(shots, "failover.png")
	browse(t, browser, "--window-size=1280,800", "--screenshot="+hpng, base+"/run?id="+url.QueryEscape(handoffRun))
	keepScreenshot(t, hpng, "failover.png")

	// The other pages load and never show the secret.
	for _, path := range []string{"/", "/?pipeline=demo&state=succeeded", "/workers", "/artifact?pipeline=demo&name=part"} {
		d := browse(t, browser, "--dump-dom", base+path)
		if strings.Contains(d, uiSecret) || strings.Contains(d, "<script>alert") {
			t.Errorf("%s shows the secret or unescaped markup", path)
		}
		if path == "/artifact?pipeline=demo&name=part" && !strings.Contains(d, "part_ok (in demo/2024-01-01/r1)") {
			t.Errorf("artifact page lacks the lineage:\n%s", d)
		}
		if path == "/workers" && (!strings.Contains(d, `data-worker="w1"`) || !strings.Contains(d, `data-worker="w2"`)) {
			t.Errorf("workers page lacks w1 or w2")
		}
	}

	// The report: one file, opened with the network off.
	rep := filepath.Join(shots, "run.html")
	cmd := exec.Command(bin, "report", demoRun, "--spec", "demo.hcl", "-o", rep)
	cmd.Dir, cmd.Env = dir, env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pipec report: %v\n%s", err, out)
	}
	b, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), uiSecret) {
		t.Fatal("the report holds the secret")
	}
	rdom := browse(t, browser, "--dump-dom", "file://"+rep)
	checkRunDOM(t, "report", rdom, atts)
	rpng := filepath.Join(shots, "report.png")
	browse(t, browser, "--window-size=1280,800", "--screenshot="+rpng, "file://"+rep)
	keepScreenshot(t, rpng, "report.png")
}

// checkRunDOM checks the demo run's page as the browser built it: one bar
// per attempt with its token, write#1 unknown, relaunched and its publish
// fenced, no secret, the hostile code_version escaped.
func checkRunDOM(t *testing.T, name, dom string, atts []store.Attempt) {
	t.Helper()
	bars := regexp.MustCompile(`<g class="bar [^"]*" data-task="([^"]*)" data-attempt="(\d+)" data-token="(\d+)"`).FindAllStringSubmatch(dom, -1)
	if len(bars) != len(atts) {
		t.Errorf("%s: %d bars, %d attempts", name, len(bars), len(atts))
	}
	for _, a := range atts {
		want := fmt.Sprintf(`data-task="%s" data-attempt="%d" data-token="%d"`, a.Task, a.Number, a.Token)
		if !strings.Contains(dom, want) {
			t.Errorf("%s: no bar %s", name, want)
		}
	}
	for _, want := range []string{
		`<g class="mark m-fenced" data-kind="fenced" data-attempt="1">`,
		`<g class="mark m-unknown" data-kind="unknown" data-attempt="1">`,
		`<g class="mark m-relaunch" data-kind="relaunch" data-attempt="1">`,
		`<g class="mark m-retry" data-kind="retry" data-attempt="1">`,
		`data-outcome="fenced" data-attempt="1"`,
		`class="bar o-failed" data-task="flaky" data-attempt="1"`,
		`v1 &lt;b&gt;bold&lt;/b&gt; \x1b[31m`,
		`&lt;script&gt;alert(1)&lt;/script&gt; key=***`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("%s lacks %q", name, want)
		}
	}
	if strings.Contains(dom, uiSecret) {
		t.Errorf("%s shows the secret", name)
	}
	if strings.Contains(dom, "\x1b") {
		t.Errorf("%s holds a raw escape character", name)
	}
}
