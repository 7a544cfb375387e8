package cli_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/cli"
	"github.com/pipec/pipec/internal/s3test"
	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/internal/tracked"
	"github.com/pipec/pipec/runtime/objstore"
)

// s3Orders copies the orders example into a folder with its artifact store
// and its sink on S3.
func s3Orders(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	tracked.Copy(t, filepath.Join("..", "examples", "orders"), dir)
	spec := filepath.Join(dir, "pipeline.hcl")
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), `code_version = "2024.06.1"`, `code_version = "2024.06.1"
  artifacts    = "s3://arts/pipec"`, 1)
	s = strings.Replace(s, `    type    = "directory"
    path    = "warehouse/orders"`, `    type    = "s3"
    path    = "s3://lake/marts/orders"`, 1)
	if s == string(b) || !strings.Contains(s, "s3://lake") {
		t.Fatal("the example's spec changed: s3Orders cannot rewrite it")
	}
	if err := os.WriteFile(spec, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestS3RunShowGC: pipec run with the artifact store and the sink on S3
// (versitygw): the versions are in the bucket, not beside the state; show
// names the visible version's immutable prefix as an s3:// URL with its
// lineage; sink show reads the fence record; a forced rerun publishes a
// newer version and gc --keep 1 prunes the older one; a run on a second
// state is refused before it uploads anything, by the artifact store until
// that state adopted the pipeline's versions there, then by the sink, and
// publishes once it adopted the sink too; the secret access key is in no output and not in
// the state.
func TestS3RunShowGC(t *testing.T) {
	s3test.Start(t, "arts", "lake")
	spec := s3Orders(t)
	dir := filepath.Dir(spec)
	var all strings.Builder
	pipec := func(want int, args ...string) string {
		t.Helper()
		code, out, errs := pipecIn(t, nil, args...)
		all.WriteString(out + errs)
		if code != want {
			t.Fatalf("pipec %s: exit %d, want %d\n%s\n%s", strings.Join(args, " "), code, want, out, errs)
		}
		return out + errs
	}
	out := pipec(0, "run", spec, "--interval", "2024-01-01")
	if !strings.Contains(out, "s3://lake/marts/orders/2024-01-01") {
		t.Errorf("run does not say where the version is visible:\n%s", out)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, ".pipec", "versions")); len(ents) != 0 {
		t.Errorf("versions kept beside the state: %v", ents)
	}
	c, err := objstore.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	objs, _, err := c.List(context.Background(), "arts", "pipec/.committed/orders/", "")
	if err != nil || len(objs) != 2 {
		t.Fatalf("committed versions in the artifact store: %v, %v; want raw_orders and orders_clean", objs, err)
	}
	out = pipec(0, "show", "orders_clean@2024-01-01", "--spec", spec)
	for _, want := range []string{"visible       s3://lake/marts/orders/2024-01-01",
		"path          s3://lake/marts/orders/.versions/orders_clean@2024-01-01#sha256-", "code_version  2024.06.1",
		"orders_clean_ok (in orders/2024-01-01/r1)", "state         agrees"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	out = pipec(0, "sink", "show", spec, "warehouse")
	if !strings.Contains(out, "bound to this state") || !strings.Contains(out, "2024-01-01  orders_clean  token") {
		t.Errorf("sink show:\n%s", out)
	}
	pipec(0, "run", spec, "--interval", "2024-01-01", "--force")
	out = pipec(0, "gc", "--spec", spec, "--keep", "1")
	if !strings.Contains(out, "s3://lake/marts/orders/.versions/orders_clean@2024-01-01#") ||
		!strings.Contains(out, "sink warehouse: superseded version of 2024-01-01") {
		t.Errorf("gc did not prune the superseded version:\n%s", out)
	}
	out = pipec(0, "show", "orders_clean@2024-01-01", "--spec", spec)
	if !strings.Contains(out, "run           orders/2024-01-01/r2") || !strings.Contains(out, "state         agrees") {
		t.Errorf("show after the rerun and gc:\n%s", out)
	}
	// A second state is refused before it uploads anything, until it
	// adopts the sink.
	other := filepath.Join(dir, "other.db")
	first, _, err := c.List(context.Background(), "lake", "marts/orders/.versions/", "")
	if err != nil {
		t.Fatal(err)
	}
	out = pipec(1, "run", spec, "--interval", "2024-01-01", "--state", other)
	if !strings.Contains(out, "holds the versions of pipeline orders for state") || !strings.Contains(out, "pipec artifacts adopt") {
		t.Errorf("a second state's run:\n%s", out)
	}
	out = pipec(0, "artifacts", "adopt", spec, "--state", other, "--reason", "moved")
	if !strings.Contains(out, "the versions of pipeline orders in s3://arts/pipec moved from state") {
		t.Errorf("artifacts adopt:\n%s", out)
	}
	out = pipec(1, "run", spec, "--interval", "2024-01-01", "--state", other)
	if !strings.Contains(out, "is bound to state") || !strings.Contains(out, "pipec sink adopt") {
		t.Errorf("a second state's run, owning the artifact store's versions:\n%s", out)
	}
	before, _, err := c.List(context.Background(), "lake", "marts/orders/.versions/", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != len(first) {
		t.Errorf("the refused state uploaded %d objects", len(before)-len(first))
	}
	out = pipec(0, "sink", "adopt", spec, "warehouse", "--state", other, "--reason", "moved")
	if !strings.Contains(out, "moved from state") {
		t.Errorf("adopt:\n%s", out)
	}
	pipec(0, "run", spec, "--interval", "2024-01-01", "--state", other, "--force")
	out = pipec(0, "show", "orders_clean@2024-01-01", "--spec", spec, "--state", other)
	if !strings.Contains(out, "state         agrees") {
		t.Errorf("show on the adopting state:\n%s", out)
	}
	after, _, err := c.List(context.Background(), "lake", "marts/orders/.versions/", "")
	if err != nil || len(after) <= len(before) {
		t.Errorf("the adopting state's publish uploaded nothing: %d objects before, %d after, %v", len(before), len(after), err)
	}
	pipec(0, "events", "orders/2024-01-01/r2", "--state", filepath.Join(dir, ".pipec", "state.db"), "--json")
	if strings.Contains(all.String(), s3test.SecretKey) {
		t.Error("the secret access key was printed")
	}
	db, err := os.ReadFile(filepath.Join(dir, ".pipec", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(db), s3test.SecretKey) {
		t.Error("the secret access key is in the state")
	}
}

// TestS3RunRefusedWithoutConditionalWrites: pipec run publishing to a fenced
// s3 sink on a server that ignores conditional writes (a proxy turns its
// refusals into 200 OK) fails the publish, says why and points to fencing =
// "none", and nothing is visible; with fencing = "none" the run publishes.
func TestS3RunRefusedWithoutConditionalWrites(t *testing.T) {
	srv := s3test.Start(t, "arts", "lake")
	u, _ := url.Parse(srv.Endpoint)
	p := httputil.NewSingleHostReverseProxy(u)
	p.ModifyResponse = func(r *http.Response) error {
		conditional := r.Request.Header.Get("If-None-Match") != "" || r.Request.Header.Get("If-Match") != ""
		if r.Request.Method == http.MethodPut && conditional && r.StatusCode == http.StatusPreconditionFailed {
			r.Body.Close()
			r.StatusCode, r.Status = http.StatusOK, "200 OK"
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader("")), 0
			r.Header = http.Header{"Etag": {`"0123456789abcdef0123456789abcdef"`}}
		}
		return nil
	}
	hs := httptest.NewServer(p)
	defer hs.Close()
	t.Setenv("AWS_ENDPOINT_URL", hs.URL)
	spec := s3Orders(t)
	code, out, errs := pipecIn(t, nil, "run", spec, "--interval", "2024-01-01")
	if code == 0 || !strings.Contains(out+errs, "does not honour conditional writes") || !strings.Contains(out+errs, `fencing = "none"`) {
		t.Fatalf("run: exit %d, want a refused publish that says why\n%s\n%s", code, out, errs)
	}
	t.Logf("the refused run says:\n%s%s", out, errs)
	c, err := objstore.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if objs, _, err := c.List(context.Background(), "lake", "marts/orders/", ""); err != nil || len(objs) != 1 {
		t.Fatalf("the sink holds %v, %v; want only the probe's object", objs, err)
	}
	b, _ := os.ReadFile(spec)
	os.WriteFile(spec, []byte(strings.Replace(string(b), `path    = "s3://lake/marts/orders"
    fencing = "token"`, `path    = "s3://lake/marts/orders"
    fencing = "none"`, 1)), 0o644)
	code, out, errs = pipecIn(t, nil, "run", spec, "--interval", "2024-01-01")
	if code != 0 || !strings.Contains(out+errs, "s3://lake/marts/orders/2024-01-01") {
		t.Fatalf("unfenced run: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestS3SecretKeyRedacted: a task that prints the object store's secret
// access key (here read from a file, as one could from ~/.aws/credentials
// through HOME) has it masked in the run's output, its log tail and the
// state's events, as a secret_env value is.
func TestS3SecretKeyRedacted(t *testing.T) {
	s3test.Start(t, "arts", "lake")
	spec := s3Orders(t)
	dir := filepath.Dir(spec)
	if err := os.WriteFile(filepath.Join(dir, "creds.txt"), []byte(s3test.SecretKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "extract.sh"), []byte("#!/bin/sh\necho \"leaking $(cat creds.txt)\" >&2\nexit 65\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errs := pipecIn(t, nil, "run", spec, "--interval", "2024-01-01")
	if code == 0 || !strings.Contains(out+errs, "leaking ***") {
		t.Fatalf("run: exit %d, want the failure with the key masked\n%s\n%s", code, out, errs)
	}
	_, ev, evErr := pipecIn(t, nil, "events", "orders/2024-01-01/r1", "--state", filepath.Join(dir, ".pipec", "state.db"), "--json")
	db, _ := os.ReadFile(filepath.Join(dir, ".pipec", "state.db"))
	for what, text := range map[string]string{"output": out + errs, "events": ev + evErr, "state": string(db)} {
		if strings.Contains(text, s3test.SecretKey) {
			t.Errorf("the secret access key is in the %s", what)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(dir, ".pipec", "logs", "*", "*", "*", "*"))
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil && strings.Contains(string(b), s3test.SecretKey) {
			t.Errorf("the secret access key is in %s", l)
		}
	}
}

// TestS3RunRidesOutRestart: a local run of a 100-task pipeline (10 layers
// of 10, every other layer publishing to its own fenced s3 sink) with its
// artifact store on S3, during which the object store (versitygw) is
// stopped for 3 s and started again on its port, twice: the puts, fetches
// and publishes sent meanwhile wait for it, and the run succeeds. (Before,
// the first request sent while it was down failed its task and the run.)
func TestS3RunRidesOutRestart(t *testing.T) {
	srv := s3test.Start(t, "arts", "lake")
	spec, _ := scenario.Chaos(10, scenario.S3Sink)
	dir, file := writeSpec(t, spec)
	if err := os.WriteFile(filepath.Join(dir, "step.sh"), []byte(scenario.ChaosStep), 0o755); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	codes := make(chan int, 1)
	go func() {
		codes <- cli.Main([]string{"run", file, "--interval", "2024-01-01", "--artifacts", "s3://arts/chaos", "--parallel", "2"},
			testIO(nil, &out, &errb))
	}()
	c := srv.Client()
	ctx := context.Background()
	for _, n := range []int{20, 50} {
		// The versions committed so far: one per task.
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			objs, _, err := c.List(ctx, "arts", "chaos/.committed/", "")
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) >= n {
				break
			}
			select {
			case code := <-codes:
				t.Fatalf("the run ended (exit %d) before %d tasks committed a version:\n%s\n%s", code, n, out.String(), errb.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d versions committed after a minute, want %d", len(objs), n)
			}
		}
		srv.Stop()
		time.Sleep(3 * time.Second)
		srv.Restart()
	}
	if code := <-codes; code != 0 || !strings.Contains(out.String(), "run chaos/2024-01-01/r1 succeeded") {
		t.Fatalf("run: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
}
