package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/s3test"
	"github.com/pipec/pipec/runtime/objstore"
)

// The server honours both preconditions, the probe says so, and the
// client's secret is known to the redactor.
func TestConditionalWrites(t *testing.T) {
	srv := s3test.Start(t, "bkt")
	c := srv.Client()
	ctx := context.Background()
	u, err := objstore.ParseURL("s3://bkt/some/prefix/")
	if err != nil || u.Key("x") != "some/prefix/x" || u.String() != "s3://bkt/some/prefix" {
		t.Fatalf("ParseURL: %+v %v", u, err)
	}
	e1, err := c.Put(ctx, "bkt", u.Key("x"), []byte("one"), objstore.Cond{IfNoneMatch: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "bkt", u.Key("x"), []byte("two"), objstore.Cond{IfNoneMatch: true}); !errors.Is(err, objstore.ErrPrecondition) {
		t.Fatalf("create over an existing key: %v, want a precondition failure", err)
	}
	e2, err := c.Put(ctx, "bkt", u.Key("x"), []byte("two"), objstore.Cond{IfMatch: e1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "bkt", u.Key("x"), []byte("three"), objstore.Cond{IfMatch: e1}); !errors.Is(err, objstore.ErrPrecondition) {
		t.Fatalf("swap on a stale ETag: %v, want a precondition failure", err)
	}
	b, etag, err := c.Get(ctx, "bkt", u.Key("x"))
	if err != nil || string(b) != "two" || etag != e2 {
		t.Fatalf("get: %q %q %v, want two %q", b, etag, err, e2)
	}
	if _, _, err := c.Get(ctx, "bkt", u.Key("missing")); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	if err := c.Probe(ctx, u, u.Key(".probe")); err != nil {
		t.Fatalf("probe: %v", err)
	}
	objs, dirs, err := c.List(ctx, "bkt", "some/", "/")
	if err != nil || len(objs) != 0 || !slices.Equal(dirs, []string{"some/prefix/"}) {
		t.Fatalf("list: %v %v %v", objs, dirs, err)
	}
}

// A key resolved from the shared credentials file, not the environment, is
// known to the redactor once a client is built with it; one client serves
// every Get of the same environment.
func TestClientsRememberSecrets(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	const secret = "file-secret-0123456789"
	if err := os.WriteFile(creds, []byte("[default]\naws_access_key_id = K\naws_secret_access_key = "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"} {
		t.Setenv(name, "")
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1")
	var cs objstore.Clients
	if slices.Contains(cs.Secrets(), secret) {
		t.Fatal("a secret is known before any client read it")
	}
	c1, err := cs.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c2, err := cs.Get(context.Background())
	if err != nil || c1 != c2 {
		t.Fatalf("second Get built another client (%p, %p, %v)", c1, c2, err)
	}
	if !slices.Contains(cs.Secrets(), secret) {
		t.Fatalf("Secrets %d values, none the shared file's key", len(cs.Secrets()))
	}
	var fresh objstore.Clients
	if slices.Contains(fresh.Secrets(), secret) {
		t.Fatal("a second Clients knows the first one's secrets: they share state")
	}
}

// A file above the multipart threshold goes up in parts (an ETag of a
// multipart object ends in -<parts>) and reads back whole.
func TestPutFileInParts(t *testing.T) {
	srv := s3test.Start(t, "bkt")
	c := srv.Client()
	const part = 5 << 20 // S3's smallest part
	objstore.SetMultipart(c, part, part)
	body := make([]byte, 2*part+12345)
	for i := range body {
		body[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.PutFile(ctx, "bkt", "v/big", path); err != nil {
		t.Fatal(err)
	}
	objs, _, err := c.List(ctx, "bkt", "v/", "")
	if err != nil || len(objs) != 1 || objs[0].Size != int64(len(body)) {
		t.Fatalf("list after the upload: %+v %v", objs, err)
	}
	got, etag, err := c.Get(ctx, "bkt", "v/big")
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(body))
	}
	if !strings.HasSuffix(strings.Trim(etag, `"`), "-3") {
		t.Errorf("ETag %s: not a 3-part upload", etag)
	}
	small := filepath.Join(t.TempDir(), "small")
	if err := os.WriteFile(small, []byte("small"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.PutFile(ctx, "bkt", "v/small", small); err != nil {
		t.Fatal(err)
	}
	if _, etag, err := c.Get(ctx, "bkt", "v/small"); err != nil || strings.Contains(etag, "-") {
		t.Errorf("a small file: ETag %s (%v), want one part", etag, err)
	}
}

// A server that stops answering, its connection open, fails a request
// (after the SDK's tries) instead of holding it for ever; once it answers
// again, so does the client.
func TestServerThatStopsAnswering(t *testing.T) {
	srv := s3test.Start(t, "bkt")
	c, err := objstore.NewAnsweringWithin(context.Background(), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Put(ctx, "bkt", "k", []byte("v"), objstore.Cond{}); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			srv.Resume()
		}
	})
	timesOut(t, "a get from a stopped server", func() error {
		_, _, err := c.Get(ctx, "bkt", "k")
		return err
	})
	srv.Resume()
	resumed = true
	if b, _, err := c.Get(ctx, "bkt", "k"); err != nil || string(b) != "v" {
		t.Fatalf("get once the server answers again: %q %v", b, err)
	}
}

// A server that stops in the middle of a transfer, either way, fails it
// instead of holding it for ever: a body it stops sending, and one it stops
// taking. The bound is on silence, not on the transfer's length.
func TestServerThatStopsMidTransfer(t *testing.T) {
	srv := s3test.Start(t, "bkt")
	c, err := objstore.NewAnsweringWithin(context.Background(), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Larger than what the sockets' buffers hold, so that a stopped server
	// leaves a transfer waiting.
	big := bytes.Repeat([]byte("pipec "), 64<<20/6)
	if _, err := c.Put(ctx, "bkt", "big", big, objstore.Cond{}); err != nil {
		t.Fatal(err)
	}
	paused := false
	t.Cleanup(func() {
		if paused {
			srv.Resume()
		}
	})
	timesOut(t, "a get whose server stops after its first bytes", func() error {
		_, err := c.GetTo(ctx, "bkt", "big", writerFunc(func(p []byte) (int, error) {
			if !paused {
				srv.Pause()
				paused = true
			}
			return len(p), nil
		}))
		return err
	})
	timesOut(t, "a put to a stopped server", func() error {
		_, err := c.Put(ctx, "bkt", "big2", big, objstore.Cond{})
		return err
	})
	srv.Resume()
	paused = false
	// What the server wrote is whole. (Read with the usual bound: the
	// server catches up on the stalled transfers first.)
	var got bytes.Buffer
	if n, err := srv.Client().GetTo(ctx, "bkt", "big", &got); err != nil || n != int64(len(big)) || !bytes.Equal(got.Bytes(), big) {
		t.Fatalf("get once the server goes on: %d bytes, %v", n, err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// timesOut runs f, a request to a server that stopped, and fails t unless
// it gives up with a timeout (within a minute: the bound only ends a
// broken test).
func timesOut(t *testing.T, what string, f func() error) {
	t.Helper()
	got := make(chan error, 1)
	go func() { got <- f() }()
	select {
	case err := <-got:
		t.Logf("%s: %v", what, err)
		if err == nil || !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("%s: %v, want a timeout", what, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s did not give up", what)
	}
}

// A server that is away (refusing connections: stopped, then started again
// on its port, as a restart does) is waited for: every kind of request sent
// while it is down gets through once it is back. One away for longer than
// the client waits fails the request, saying so.
func TestServerAwayIsWaitedFor(t *testing.T) {
	srv := s3test.Start(t, "bkt")
	c := srv.Client()
	ctx := context.Background()
	if _, err := c.Put(ctx, "bkt", "k", []byte("v"), objstore.Cond{}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, []byte("file"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"put": func() error {
			_, err := c.Put(ctx, "bkt", "new", []byte("n"), objstore.Cond{IfNoneMatch: true})
			return err
		},
		"put file": func() error { return c.PutFile(ctx, "bkt", "file", file) },
		"get": func() error {
			b, _, err := c.Get(ctx, "bkt", "k")
			if err == nil && string(b) != "v" {
				err = fmt.Errorf("read %q", b)
			}
			return err
		},
		"exists": func() error {
			ok, err := c.Exists(ctx, "bkt", "k")
			if err == nil && !ok {
				err = errors.New("not found")
			}
			return err
		},
		"list": func() error {
			objs, _, err := c.List(ctx, "bkt", "", "")
			if err == nil && len(objs) == 0 {
				err = errors.New("listed nothing")
			}
			return err
		},
		"delete": func() error { return c.Delete(ctx, "bkt", "gone") },
	}
	srv.Stop()
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(calls))
	for name, call := range calls {
		go func() { results <- result{name, call()} }()
	}
	time.Sleep(2 * time.Second) // longer than the SDK's own tries
	srv.Restart()
	for range calls {
		r := <-results
		if r.err != nil {
			t.Errorf("%s sent while the server was down: %v", r.name, r.err)
		}
	}
	if b, _, err := c.Get(ctx, "bkt", "new"); err != nil || string(b) != "n" {
		t.Errorf("the put made while the server was down: %q %v", b, err)
	}

	srv.Stop()
	start := time.Now()
	_, _, err := c.Get(objstore.WaitingForServer(ctx, time.Second), "bkt", "k")
	if err == nil || !strings.Contains(err.Error(), "the object store was away for 1s") {
		t.Errorf("get from a server away for good: %v", err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("get from a server away for good gave up after %s, before the wait of 1s", d)
	}
}

// A server that answers 503 (unavailable; S3's "slow down") for longer than
// the SDK's own tries last is waited for too: a proxy in front of the
// server answers every request so for its first second.
func TestServerUnavailableIsWaitedFor(t *testing.T) {
	srv := s3test.Start(t, "bkt")
	u, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := httputil.NewSingleHostReverseProxy(u)
	until := time.Now().Add(time.Second)
	var refused atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if time.Now().Before(until) {
			refused.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Setenv("AWS_ENDPOINT_URL", hs.URL)
	c, err := objstore.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(context.Background(), "bkt", "k", []byte("v"), objstore.Cond{IfNoneMatch: true}); err != nil {
		t.Fatalf("put to a server unavailable for a second: %v", err)
	}
	if n := refused.Load(); n <= 3 {
		t.Fatalf("the proxy refused %d requests, not more than the SDK's own tries", n)
	}
}

// An endpoint whose host name does not resolve (a typo) is said at once,
// not waited for as a server that is restarting.
func TestUnknownHostIsNotWaitedFor(t *testing.T) {
	var dns *net.DNSError
	if _, err := net.LookupHost("nosuchhost.invalid"); !errors.As(err, &dns) || !dns.IsNotFound {
		t.Skipf("this machine's resolver does not say that a name is unknown: %v", err)
	}
	t.Setenv("AWS_ENDPOINT_URL", "http://nosuchhost.invalid:9000")
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	c, err := objstore.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err = c.Get(context.Background(), "bkt", "k")
	if err == nil || !strings.Contains(err.Error(), "no such host") || strings.Contains(err.Error(), "away") {
		t.Fatalf("get from an endpoint that does not resolve: %v, want the name's failure, not a wait", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("said after %s: waited for as a restart", d.Round(time.Second))
	}
}
