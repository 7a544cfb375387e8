package sink

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/s3test"
	"github.com/pipec/pipec/runtime/objstore"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

const s3SinkURL = "s3://lake/marts/orders"

func (f *fixture) s3sink(t testing.TB, st store.Store, fencing string) *S3 {
	t.Helper()
	s, err := NewS3(context.Background(), "warehouse", s3SinkURL, fencing, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Pipeline = "orders"
	return s
}

// readS3 reads the interval as a reader should (the pointer once, then the
// files from the version's prefix) and returns the token the pointer named
// and each file's content.
func readS3(ctx context.Context, s *S3, interval string) (int64, []string, error) {
	rec, _, err := s.readRecord(ctx, interval)
	if err != nil || rec == nil {
		return 0, nil, err
	}
	var out []string
	for _, name := range versionFiles {
		b, _, err := s.Client.Get(ctx, s.URL.Bucket, s.versionKey(rec.Version)+name)
		if err != nil {
			return 0, nil, err
		}
		out = append(out, string(b))
	}
	return rec.Token, out, nil
}

// versionPrefixes counts the versions uploaded to the sink.
func versionPrefixes(t testing.TB, s *S3) int {
	t.Helper()
	_, dirs, err := s.Client.List(context.Background(), s.URL.Bucket, s.URL.Key(VersionsDir)+"/", "/")
	if err != nil {
		t.Fatal(err)
	}
	return len(dirs)
}

// The s3 sink keeps the directory sink's promises: a publish wins and is
// visible with its lineage; a stale token is fenced by the sink's own
// pointer even when the store forgot; the same publish again is idempotent;
// a second state is refused before it uploads anything, until it adopts
// the sink; gc --keep prunes superseded versions, never the visible one.
func TestS3SinkFencesAndAdopts(t *testing.T) {
	s3test.Start(t, "lake")
	ctx := context.Background()
	a, b := newFixture(t), newFixture(t)
	sa := a.s3sink(t, a.st, FencingToken)
	v1 := a.produce(t, a.st, "clean", "2024-01-01", filesOf("one\n"))
	v2 := a.produce(t, a.st, "clean", "2024-01-01", filesOf("two\n"))
	res, err := sa.Publish(ctx, v2)
	if err != nil || res.Outcome != store.Won {
		t.Fatalf("publish v2 = %+v, %v", res, err)
	}
	if res.Visible != s3SinkURL+"/2024-01-01" || !strings.HasPrefix(res.VersionDir, s3SinkURL+"/.versions/orders_clean@2024-01-01#sha256-") {
		t.Errorf("visible %s, version %s", res.Visible, res.VersionDir)
	}
	if res, err := sa.Publish(ctx, v2); err != nil || res.Outcome != store.Idempotent {
		t.Fatalf("publish v2 again = %+v, %v", res, err)
	}
	if res, err := sa.Publish(ctx, v1); err != nil || res.Outcome != store.Fenced || res.FencedBy != "sink" {
		t.Fatalf("publish of the older token = %+v, %v; want fenced by the sink", res, err)
	}
	if n := versionPrefixes(t, sa); n != 1 {
		t.Errorf("%d versions uploaded, want 1 (a fenced publish uploads nothing)", n)
	}
	vis, err := sa.VisibleVersion(ctx, "2024-01-01")
	if err != nil || vis.Manifest.Token != v2.Token || vis.Manifest.Run != a.run.ID || vis.Name != VersionName(v2) ||
		vis.Location != res.VersionDir {
		t.Fatalf("visible = %+v, %v", vis, err)
	}
	if _, err := sa.VisibleVersion(ctx, "2024-01-02"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("visible of an interval never published: %v", err)
	}

	// Another state: refused before anything is uploaded.
	sb := b.s3sink(t, b.st, FencingToken)
	vb := b.produce(t, b.st, "clean", "2024-01-01", filesOf("from b\n"))
	var foreign *ForeignStateError
	if _, err := sb.Publish(ctx, vb); !errors.As(err, &foreign) {
		t.Fatalf("b's publish = %v, want a *ForeignStateError", err)
	}
	if n := versionPrefixes(t, sa); n != 1 {
		t.Errorf("%d versions uploaded: the refused state uploaded its data", n)
	}
	// Asked before a task runs, the same answers.
	idA, idB := stateID(t, a.st), stateID(t, b.st)
	if err := sb.TakesState(ctx, idB); !errors.As(err, &foreign) {
		t.Errorf("does the sink take b's publishes: %v, want a *ForeignStateError", err)
	}
	if err := sa.TakesState(ctx, idA); err != nil {
		t.Errorf("does the sink take a's publishes: %v, want yes", err)
	}
	ad, err := sb.Adopt(ctx, "moved", time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC))
	if err != nil || ad.Previous == nil || ad.Floor != v2.Token {
		t.Fatalf("adopt = %+v, %v", ad, err)
	}
	vb2 := b.produce(t, b.st, "clean", "2024-01-01", filesOf("from b, adopted\n"))
	if res, err := sb.Publish(ctx, vb2); err != nil || res.Outcome != store.Won {
		t.Fatalf("the adopter's publish = %+v, %v", res, err)
	}
	if _, err := sa.Publish(ctx, a.produce(t, a.st, "clean", "2024-01-01", filesOf("a again\n"))); !errors.As(err, &foreign) {
		t.Errorf("the old state's publish after the adoption = %v, want refused", err)
	}
	bd, recs, err := sa.FenceRecords(ctx)
	if err != nil || bd.State != idB || len(bd.Adoptions) != 1 || len(recs) != 1 || recs[0].Token != vb2.Token {
		t.Fatalf("records = %+v %+v, %v", bd, recs, err)
	}
	if ivs, err := sa.Intervals(ctx); err != nil || len(ivs) != 1 || ivs[0] != "2024-01-01" {
		t.Errorf("intervals = %v, %v", ivs, err)
	}
	// Three more versions; keep 2: the two oldest go, the visible stays.
	for i := range 3 {
		v := b.produce(t, b.st, "clean", "2024-01-01", filesOf(fmt.Sprintf("b %d\n", i)))
		if res, err := sb.Publish(ctx, v); err != nil || res.Outcome != store.Won {
			t.Fatalf("publish = %+v, %v", res, err)
		}
	}
	pruned, err := sb.PruneVersions(ctx, PruneOptions{Keep: 2, TmpAge: time.Hour, Now: time.Now()})
	if err != nil || len(pruned) != 3 || pruned[0].Bytes == 0 {
		t.Fatalf("pruned %+v, %v; want 3 (of 5)", pruned, err)
	}
	tok, files, err := readS3(ctx, sb, "2024-01-01")
	if err != nil || files[0] != "b 2\n" || tok == 0 {
		t.Fatalf("after prune: %d %q %v", tok, files, err)
	}
	if n := versionPrefixes(t, sb); n != 2 {
		t.Errorf("%d versions left, want 2", n)
	}
	// Fenced at grant: a newer attempt of the producing task holds a higher
	// token, published or not.
	late := b.produce(t, b.st, "clean", "2024-01-01", filesOf("late\n"))
	if _, err := b.st.StartAttempt(ctx, store.AttemptSpec{Run: b.run.ID, Task: "clean", Resource: store.FenceResource("orders", "2024-01-01")}); err != nil {
		t.Fatal(err)
	}
	if res, err := sb.Publish(ctx, late); err != nil || res.Outcome != store.Fenced || res.FencedBy != "grant" {
		t.Fatalf("publish after a newer grant = %+v, %v; want fenced at grant", res, err)
	}
	if _, files, err := readS3(ctx, sb, "2024-01-01"); err != nil || files[0] != "b 2\n" {
		t.Fatalf("visible after the fenced publish: %q %v", files, err)
	}
}

// TestS3RacingPublishers: 8 publishers, each with its own store handle on
// one database file, race on one interval with distinct tokens, round after
// round (1,000; 100 with -short), while a reader reads the interval as
// documented. Each round ends with exactly the highest token of the round
// visible in the bucket and in the store; the reader never sees a mix of two
// versions, an unaudited one, or the token going back.
func TestS3RacingPublishers(t *testing.T) {
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	if n, err := strconv.Atoi(os.Getenv("PIPEC_S3_ROUNDS")); err == nil {
		rounds = n
	}
	s3test.Start(t, "lake")
	const publishers = 8
	const interval = "2024-01-01"
	f := newFixture(t)
	ctx := context.Background()

	audited := &sync.Map{}
	rs := f.s3sink(t, f.st, FencingToken)
	stop := make(chan struct{})
	readErr := make(chan error, 1)
	var reads atomic.Int64
	var background sync.WaitGroup
	background.Add(1)
	go func() {
		defer background.Done()
		var last int64
		for {
			select {
			case <-stop:
				return
			default:
			}
			tok, files, err := readS3(ctx, rs, interval)
			if err == nil && files != nil {
				switch {
				case files[0] != files[1]:
					err = fmt.Errorf("mixed read at token %d: %q and %q", tok, files[0], files[1])
				case tok < last:
					err = fmt.Errorf("the pointer went back from token %d to %d", last, tok)
				default:
					if _, ok := audited.Load(files[0]); !ok {
						err = fmt.Errorf("read %q: not an audited version", files[0])
					}
				}
				last = tok
				reads.Add(1)
			}
			if err != nil {
				readErr <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()

	type outcome struct {
		res Result
		err error
	}
	ready := make(chan error, publishers)
	results := make(chan outcome, publishers)
	release := make([]chan struct{}, publishers)
	for p := range publishers {
		release[p] = make(chan struct{}, 1)
		st := f.open(t)
		s := f.s3sink(t, st, FencingToken)
		background.Add(1)
		go func() {
			defer background.Done()
			for round := 1; ; round++ {
				content := versionContent(round, p)
				v, err := f.tryProduce(st, fmt.Sprintf("p%d", p), interval, filesOf(content))
				if err == nil {
					audited.Store(content, struct{}{})
				}
				ready <- err
				if _, ok := <-release[p]; !ok {
					return
				}
				res, err := s.Publish(ctx, v)
				results <- outcome{res, err}
			}
		}()
	}
	defer func() {
		close(stop)
		for _, ch := range release {
			close(ch)
		}
		background.Wait()
	}()
	var lastToken int64
	won := 0
	for round := 1; round <= rounds; round++ {
		for range publishers {
			if err := <-ready; err != nil {
				t.Fatalf("round %d: producing: %v", round, err)
			}
		}
		for _, ch := range release {
			ch <- struct{}{}
		}
		var highest Result
		for range publishers {
			o := <-results
			if o.err != nil {
				t.Fatalf("round %d: %v", round, o.err)
			}
			if o.res.Version.Token > highest.Version.Token {
				highest = o.res
			}
			switch o.res.Outcome {
			case store.Won:
				won++
			case store.Fenced:
			default:
				t.Fatalf("round %d: outcome %s", round, o.res.Outcome)
			}
		}
		if highest.Outcome != store.Won {
			t.Fatalf("round %d: the highest token %d was %s", round, highest.Version.Token, highest.Outcome)
		}
		p, err := f.st.Pointer(ctx, "orders", "warehouse", "orders_clean", interval)
		if err != nil || p.Token != highest.Version.Token {
			t.Fatalf("round %d: store pointer %+v, %v; highest token %d", round, p, err, highest.Version.Token)
		}
		tok, files, err := readS3(ctx, rs, interval)
		want := versionContent(round, int(highest.Version.Task[1]-'0'))
		if err != nil || tok != highest.Version.Token || files[0] != want {
			t.Fatalf("round %d: visible token %d %q, %v; want %d %q", round, tok, files, err, highest.Version.Token, want)
		}
		if tok <= lastToken {
			t.Fatalf("round %d: token %d after %d", round, tok, lastToken)
		}
		lastToken = tok
		select {
		case err := <-readErr:
			t.Fatalf("reader, round %d: %v", round, err)
		default:
		}
	}
	if reads.Load() == 0 {
		t.Fatal("the reader never read a published version")
	}
	t.Logf("%d rounds, %d publishes won (of %d), %d concurrent reads, last token %d, %d round trips",
		rounds, won, rounds*publishers, reads.Load(), lastToken, rs.Client.RoundTrips())
}

// s3ChildEnv makes the test binary a publisher that stops itself to be
// stopped (see publishStopped).
const s3ChildEnv = "PIPEC_SINK_TEST_S3_CHILD"

// publishStopped publishes version PIPEC_SINK_TEST_VERSION of the fixture in
// dir to the s3 sink; when it has uploaded, judged and won in the store, it
// says SWAP and sleeps a moment (the parent SIGSTOPs it there), then swaps,
// and prints the outcome.
func publishStopped(dir string) int {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, ".pipec", "state.db"), sqlite.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	id, _ := strconv.ParseInt(os.Getenv("PIPEC_SINK_TEST_VERSION"), 10, 64)
	v, err := st.GetVersion(ctx, id)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := NewS3(ctx, "warehouse", s3SinkURL, FencingToken, st, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s.Pipeline = "orders"
	beforeSwap = func() {
		fmt.Println("SWAP")
		time.Sleep(time.Second)
	}
	res, err := s.Publish(ctx, v)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("RESULT", res.Outcome, res.FencedBy, res.HeldToken)
	return 0
}

// TestS3StoppedWriterIsRefused: a real process publishing to the s3 sink is
// SIGSTOPped after it uploaded its version, judged it against the pointer
// and won in the store, right before its pointer swap; its successor
// publishes meanwhile; resumed, the stopped writer's swap is refused by the
// object store (the ETag it judged is gone), it judges again and is fenced:
// the successor's version stays visible.
func TestS3StoppedWriterIsRefused(t *testing.T) {
	s3test.Start(t, "lake")
	f := newFixture(t)
	ctx := context.Background()
	stale := f.produce(t, f.st, "clean", "2024-01-01", filesOf("stale\n"))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), s3ChildEnv+"="+f.dir, "PIPEC_SINK_TEST_VERSION="+strconv.FormatInt(stale.ID, 10))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "SWAP" {
		t.Fatalf("child said %q, want SWAP", lines.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	fresh := f.produce(t, f.st, "clean", "2024-01-01", filesOf("fresh\n"))
	s := f.s3sink(t, f.st, FencingToken)
	if res, err := s.Publish(ctx, fresh); err != nil || res.Outcome != store.Won {
		t.Fatalf("the successor's publish = %+v, %v", res, err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() {
		t.Fatal("child said nothing more")
	}
	want := fmt.Sprintf("RESULT fenced sink %d", fresh.Token)
	if lines.Text() != want {
		t.Fatalf("child: %q, want %q", lines.Text(), want)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	tok, files, err := readS3(ctx, s, "2024-01-01")
	if err != nil || tok != fresh.Token || files[0] != "fresh\n" {
		t.Fatalf("visible: token %d %q %v, want the successor's %d", tok, files, err, fresh.Token)
	}
	if n, err := s.ReconcileAll(ctx); err != nil || n != 0 {
		t.Errorf("reconcile: %d %v", n, err)
	}
}

// ignoringServer puts a proxy in front of the test server that makes it
// look like a server without conditional writes: a write refused for its
// precondition is answered 200 OK (as a server that ignores If-None-Match
// and If-Match would, having written it).
func ignoringServer(t *testing.T, srv *s3test.Server) string { return proxyConditional(t, srv, false) }

// proxyConditional is ignoringServer, or with notImplemented a server that
// answers every conditional write 501 NotImplemented (as some do).
func proxyConditional(t *testing.T, srv *s3test.Server, notImplemented bool) string {
	u, _ := url.Parse(srv.Endpoint)
	p := httputil.NewSingleHostReverseProxy(u)
	p.ModifyResponse = func(r *http.Response) error {
		conditional := r.Request.Header.Get("If-None-Match") != "" || r.Request.Header.Get("If-Match") != ""
		if notImplemented && r.Request.Method == http.MethodPut && conditional {
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
			body := "<Error><Code>NotImplemented</Code><Message>A header you provided implies functionality that is not implemented.</Message></Error>"
			r.StatusCode, r.Status = http.StatusNotImplemented, "501 Not Implemented"
			r.Body = io.NopCloser(strings.NewReader(body))
			r.ContentLength = int64(len(body))
			r.Header = http.Header{"Content-Type": {"application/xml"}, "Content-Length": {strconv.Itoa(len(body))}}
			return nil
		}
		if r.Request.Method == http.MethodPut && conditional && r.StatusCode == http.StatusPreconditionFailed {
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
			r.StatusCode, r.Status = http.StatusOK, "200 OK"
			r.Body = io.NopCloser(strings.NewReader(""))
			r.ContentLength = 0
			r.Header = http.Header{"Etag": {`"0123456789abcdef0123456789abcdef"`}}
		}
		return nil
	}
	hs := httptest.NewServer(p)
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestS3ProbeRefusesUnconditionalServer: on a server that ignores
// conditional writes, a fenced s3 sink refuses to publish (before it
// uploads anything) and says to use fencing = "none"; with fencing = "none"
// it publishes, at-least-once.
func TestS3ProbeRefusesUnconditionalServer(t *testing.T) {
	srv := s3test.Start(t, "lake")
	t.Setenv("AWS_ENDPOINT_URL", ignoringServer(t, srv))
	f := newFixture(t)
	ctx := context.Background()
	s := f.s3sink(t, f.st, FencingToken)
	v := f.produce(t, f.st, "clean", "2024-01-01", filesOf("one\n"))
	_, err := s.Publish(ctx, v)
	var nc *NoConditionalWritesError
	if !errors.As(err, &nc) || !strings.Contains(err.Error(), `fencing = "none"`) {
		t.Fatalf("publish = %v, want a refusal pointing to fencing = \"none\"", err)
	}
	if n := versionPrefixes(t, s); n != 0 {
		t.Errorf("%d versions uploaded before the refusal", n)
	}
	if _, err := f.st.Pointer(ctx, "orders", "warehouse", "orders_clean", "2024-01-01"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the store's pointer moved: %v", err)
	}
	u := f.s3sink(t, f.st, FencingNone)
	res, err := u.Publish(ctx, v)
	if err != nil || res.Outcome != store.Won || !res.Unfenced {
		t.Fatalf("unfenced publish = %+v, %v", res, err)
	}
	var rec Record
	b, _, err := u.Client.Get(ctx, "lake", "marts/orders/2024-01-01")
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.Token != v.Token {
		t.Fatalf("pointer %s, %v", b, err)
	}
}

// TestS3ServerStoppedMidUpload: the server is stopped while a publish
// uploads a version of many files, and started again. The publish fails;
// the version visible before stays visible, whole; nothing names the half
// upload; the same publish again completes it.
func TestS3ServerStoppedMidUpload(t *testing.T) {
	srv := s3test.Start(t, "lake")
	f := newFixture(t)
	ctx := context.Background()
	s := f.s3sink(t, f.st, FencingToken)
	v1 := f.produce(t, f.st, "clean", "2024-01-01", filesOf("before\n"))
	if res, err := s.Publish(ctx, v1); err != nil || res.Outcome != store.Won {
		t.Fatalf("first publish = %+v, %v", res, err)
	}
	many := filesOf("after\n")
	for i := range 400 {
		many[fmt.Sprintf("extra/part-%03d.csv", i)] = strings.Repeat("x", 4096)
	}
	v2 := f.produce(t, f.st, "clean", "2024-01-01", many)
	start := s.Client.RoundTrips()
	done := make(chan error, 1)
	go func() {
		// A server away for good: the publish waits a moment, not the
		// default's half a minute.
		_, err := s.Publish(objstore.WaitingForServer(ctx, 200*time.Millisecond), v2)
		done <- err
	}()
	for s.Client.RoundTrips() < start+40 {
		time.Sleep(time.Millisecond)
	}
	srv.Stop()
	if err := <-done; err == nil {
		t.Fatal("the publish succeeded with the server stopped mid-upload")
	}
	srv.Restart()
	tok, files, err := readS3(ctx, s, "2024-01-01")
	if err != nil || tok != v1.Token || files[0] != "before\n" || files[1] != "before\n" {
		t.Fatalf("after the failed publish: token %d %q %v, want the first version", tok, files, err)
	}
	if vis, err := s.VisibleVersion(ctx, "2024-01-01"); err != nil || vis.Manifest.Token != v1.Token {
		t.Fatalf("visible = %+v, %v", vis, err)
	}
	res, err := s.Publish(ctx, v2)
	if err != nil || res.Outcome != store.Won {
		t.Fatalf("the publish again = %+v, %v", res, err)
	}
	dir := t.TempDir()
	rec, err := s.Download(ctx, "2024-01-01", dir)
	if err != nil || rec.Token != v2.Token {
		t.Fatalf("download: %+v %v", rec, err)
	}
	if d, err := ContentDigest(dir); err != nil || d != v2.Digest {
		t.Fatalf("the visible version's digest %s %v, want %s", d, err, v2.Digest)
	}
}

// TestS3AdoptedDuringPublish: another state adopts the sink while a publish
// of the bound state is between its upload and its pointer swap: the
// publish is refused (the binding is read again before the swap), and the
// visible version stays the one before.
func TestS3AdoptedDuringPublish(t *testing.T) {
	s3test.Start(t, "lake")
	ctx := context.Background()
	a, b := newFixture(t), newFixture(t)
	sa, sb := a.s3sink(t, a.st, FencingToken), b.s3sink(t, b.st, FencingToken)
	v1 := a.produce(t, a.st, "clean", "2024-01-01", filesOf("one\n"))
	if res, err := sa.Publish(ctx, v1); err != nil || res.Outcome != store.Won {
		t.Fatalf("publish = %+v, %v", res, err)
	}
	v2 := a.produce(t, a.st, "clean", "2024-01-01", filesOf("two\n"))
	beforeSwap = func() {
		beforeSwap = nil
		if _, err := sb.Adopt(ctx, "moved", time.Now()); err != nil {
			t.Error(err)
		}
	}
	defer func() { beforeSwap = nil }()
	_, err := sa.Publish(ctx, v2)
	var foreign *ForeignStateError
	if !errors.As(err, &foreign) {
		t.Fatalf("publish across an adoption = %v, want refused", err)
	}
	if tok, files, err := readS3(ctx, sa, "2024-01-01"); err != nil || tok != v1.Token || files[0] != "one\n" {
		t.Fatalf("visible: %d %q %v", tok, files, err)
	}
}

// TestS3ProbeRefusesNotImplemented: a server that answers conditional
// writes "not implemented" is refused the same way, before any upload.
func TestS3ProbeRefusesNotImplemented(t *testing.T) {
	srv := s3test.Start(t, "lake")
	t.Setenv("AWS_ENDPOINT_URL", proxyConditional(t, srv, true))
	f := newFixture(t)
	s := f.s3sink(t, f.st, FencingToken)
	v := f.produce(t, f.st, "clean", "2024-01-01", filesOf("one\n"))
	_, err := s.Publish(context.Background(), v)
	var nc *NoConditionalWritesError
	if !errors.As(err, &nc) || !strings.Contains(err.Error(), "not implemented") {
		t.Fatalf("publish = %v, want a refusal", err)
	}
	if n := versionPrefixes(t, s); n != 0 {
		t.Errorf("%d versions uploaded before the refusal", n)
	}
}

// TestS3TwoStatesPublishFirstAtOnce: two states publish to a new s3 sink at
// the same moment: the binding is created once (If-None-Match: *), one
// state publishes and the other is refused having uploaded nothing.
func TestS3TwoStatesPublishFirstAtOnce(t *testing.T) {
	s3test.Start(t, "lake")
	ctx := context.Background()
	for round := range 10 {
		a, b := newFixture(t), newFixture(t)
		url := fmt.Sprintf("s3://lake/round-%d", round)
		sa, err := NewS3(ctx, "warehouse", url, FencingToken, a.st, nil)
		if err != nil {
			t.Fatal(err)
		}
		sb, _ := NewS3(ctx, "warehouse", url, FencingToken, b.st, nil)
		va := a.produce(t, a.st, "clean", "2024-01-01", filesOf("from a\n"))
		vb := b.produce(t, b.st, "clean", "2024-01-01", filesOf("from b\n"))
		errs := make(chan error, 2)
		for _, p := range []struct {
			s *S3
			v store.Version
		}{{sa, va}, {sb, vb}} {
			go func() {
				_, err := p.s.Publish(ctx, p.v)
				errs <- err
			}()
		}
		refused := 0
		for range 2 {
			err := <-errs
			var foreign *ForeignStateError
			switch {
			case errors.As(err, &foreign):
				refused++
			case err != nil:
				t.Fatal(err)
			}
		}
		if refused != 1 {
			t.Fatalf("round %d: %d states refused, want 1", round, refused)
		}
		if n := versionPrefixes(t, sa); n != 1 {
			t.Fatalf("round %d: %d versions uploaded, want the winner's only", round, n)
		}
	}
}

// TestS3ReconcileCompletesStoppedPublish: a publish stops after the
// state's pointer swap and before the sink's (its context is cancelled
// there); ReconcileAll (a run's start) swaps the sink's pointer to it, and
// never back afterwards.
func TestS3ReconcileCompletesStoppedPublish(t *testing.T) {
	s3test.Start(t, "lake")
	f := newFixture(t)
	s := f.s3sink(t, f.st, FencingToken)
	v1 := f.produce(t, f.st, "clean", "2024-01-01", filesOf("one\n"))
	if res, err := s.Publish(context.Background(), v1); err != nil || res.Outcome != store.Won {
		t.Fatalf("publish = %+v, %v", res, err)
	}
	v2 := f.produce(t, f.st, "clean", "2024-01-01", filesOf("two\n"))
	ctx, cancel := context.WithCancel(context.Background())
	beforeSwap = func() { beforeSwap = nil; cancel() }
	defer func() { beforeSwap = nil }()
	if _, err := s.Publish(ctx, v2); err == nil || !strings.Contains(err.Error(), "sink not") {
		t.Fatalf("the stopped publish = %v, want it stopped between the swaps", err)
	}
	bg := context.Background()
	if tok, _, err := readS3(bg, s, "2024-01-01"); err != nil || tok != v1.Token {
		t.Fatalf("visible before reconcile: %d %v", tok, err)
	}
	if n, err := s.ReconcileAll(bg); err != nil || n != 1 {
		t.Fatalf("reconcile: %d %v, want 1 change", n, err)
	}
	if tok, files, err := readS3(bg, s, "2024-01-01"); err != nil || tok != v2.Token || files[0] != "two\n" {
		t.Fatalf("visible after reconcile: %d %q %v", tok, files, err)
	}
	if n, err := s.ReconcileAll(bg); err != nil || n != 0 {
		t.Fatalf("second reconcile: %d %v, want none", n, err)
	}
	// A settled sink is reconciled from one listing, whatever the number
	// of its intervals: a backfill's runs each start with one.
	for _, iv := range []string{"2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"} {
		if _, err := s.Publish(bg, f.produce(t, f.st, "clean", iv, filesOf(iv+"\n"))); err != nil {
			t.Fatal(err)
		}
	}
	trips := s.Client.RoundTrips()
	reads := &versionReads{Store: s.Store}
	s.Store = reads
	if n, err := s.ReconcileAll(bg); err != nil || n != 0 {
		t.Fatalf("reconcile of a settled sink: %d %v, want none", n, err)
	}
	if trips = s.Client.RoundTrips() - trips; trips > 2 {
		t.Errorf("reconciling a settled sink of 5 intervals took %d requests, want 2 (the binding and the listing)", trips)
	}
	// And one read of the state for the pointers' versions, not one each.
	if n := reads.gets.Load(); n != 0 {
		t.Errorf("reconciling a settled sink of 5 intervals read %d versions one by one, want them read with the pointers", n)
	}
}

// versionReads counts a store's GetVersion calls.
type versionReads struct {
	store.Store
	gets atomic.Int64
}

func (r *versionReads) GetVersion(ctx context.Context, id int64) (store.Version, error) {
	r.gets.Add(1)
	return r.Store.GetVersion(ctx, id)
}

func stateID(t *testing.T, st store.Store) string {
	t.Helper()
	id, err := st.StateID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return id
}
