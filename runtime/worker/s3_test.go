package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/s3test"
	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/objstore"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// TestS3DifferentWorkers is TestDifferentWorkers with no shared folder at
// all: workers on PostgreSQL, the artifact store and the sink on S3
// (versitygw). The producer and its consumer run on different workers with
// separate workdirs; the producer's whole workdir is removed before the
// consumer starts. The consumer downloads its input into its own workdir's
// cache and publishes to the s3 sink; the state records keys, never paths.
func TestS3DifferentWorkers(t *testing.T) {
	s3test.Start(t, "arts", "lake")
	spec := pairSpec("arts", []string{"a"}, []string{"b"})
	spec = strings.Replace(spec, `type    = "directory"
    path    = "warehouse"`, `type    = "s3"
    path    = "s3://lake/warehouse"`, 1)
	e := newEnvOn(t, onPostgres, spec, artFiles)
	if err := os.Remove(e.arts); err != nil {
		t.Fatal(err)
	}
	e.arts = "s3://arts/pipec"
	e.worker("wa", "--label", "a")
	run := e.submit("2024-01-01")
	e.until(run, "extract's end", func(rs queue.RunStatus) bool {
		for _, ts := range rs.Tasks {
			if ts.Task == "extract" {
				return ts.State == queue.WorkSucceeded
			}
		}
		return false
	})
	if err := os.RemoveAll(filepath.Join(e.dir, "work-wa")); err != nil {
		t.Fatal(err)
	}
	e.worker("wb", "--label", "b")
	if rs := e.until(run, "the run's end", finished); rs.Run.State != store.RunSucceeded {
		t.Fatalf("run %s: %+v", run, rs)
	}
	in := e.readFile("input-wb.txt")
	if rel, err := filepath.Rel(filepath.Join(e.dir, "work-wb", "cache"), in); err != nil || strings.HasPrefix(rel, "..") {
		t.Errorf("the consumer read its input from %s, not from its workdir's cache", in)
	}
	ctx := context.Background()
	for _, a := range []string{"raw", "clean"} {
		v, err := e.st.AcceptedVersion(ctx, "arts", a, "2024-01-01")
		if err != nil {
			t.Fatalf("accepted %s: %v", a, err)
		}
		if want := "arts/" + a + "/" + strings.TrimPrefix(v.Digest, "sha256:"); v.Location != want {
			t.Errorf("version %s is recorded at %q, want the key %q", v.Label(), v.Location, want)
		}
	}
	c, err := objstore.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ptr, _, err := c.Get(ctx, "lake", "warehouse/2024-01-01")
	if err != nil {
		t.Fatal(err)
	}
	var url string
	for _, line := range strings.Split(string(ptr), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ": "); ok && k == `"url"` {
			url = strings.Trim(v, `",`)
		}
	}
	key := strings.TrimPrefix(url, "s3://lake/")
	data, _, err := c.Get(ctx, "lake", key+"data.csv")
	if err != nil || string(data) != "id,worker\n1,wa\n" {
		t.Fatalf("published data at %s: %q, %v", url, data, err)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "warehouse")); !os.IsNotExist(err) {
		t.Errorf("a local warehouse folder was made: %v", err)
	}
}

// newS3ChaosEnv is the chaos pipeline of 10 layers (scenario.Chaos) with
// S3 in place of every folder: workers on PostgreSQL, the artifact store
// and every sink on S3 (versitygw), no shared folder. It returns the
// server, the env and the published tasks.
func newS3ChaosEnv(t *testing.T) (*s3test.Server, *env, []string) {
	srv := s3test.Start(t, "arts", "lake")
	spec, pubs := scenario.Chaos(10, scenario.S3Sink)
	e := newEnvOn(t, onPostgres, spec, map[string]string{"step.sh": scenario.ChaosStep})
	if err := os.Remove(e.arts); err != nil {
		t.Fatal(err)
	}
	e.arts = "s3://arts/chaos"
	return srv, e, pubs
}

// TestS3Chaos is TestChaos with S3 in place of every folder: workers on
// PostgreSQL, the artifact store and every sink on S3 (versitygw), no
// shared folder. 3 workers run a 100-task pipeline (10 layers of 10, every
// other layer publishing to its own fenced s3 sink) for 3 intervals while
// one worker is SIGSTOPped and resumed and another is killed with SIGKILL
// (a fresh one joins). Every run succeeds; a reader reading each interval
// as documented (the pointer once, then the files under the prefix it
// names) never sees a partial file, another interval's or task's data, or
// the token going back; at the end every pointer is the store's.
func TestS3Chaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test: not in -short")
	}
	_, e, pubs := newS3ChaosEnv(t)
	e.worker("w1", "--slots", "2")
	w2 := e.worker("w2", "--slots", "2")
	w3 := e.worker("w3", "--slots", "2")
	days := []string{"2024-01-01", "2024-01-02", "2024-01-03"}
	var runs []string
	for _, d := range days {
		runs = append(runs, e.submit(d))
	}
	ctx := context.Background()
	c, err := objstore.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type pointer struct {
		Token int64  `json:"token"`
		URL   string `json:"url"`
	}
	read := func(name, day string) (pointer, string, error) {
		var p pointer
		b, _, err := c.Get(ctx, "lake", name+"/"+day)
		if err != nil {
			return p, "", err
		}
		if err := json.Unmarshal(b, &p); err != nil {
			return p, "", err
		}
		data, _, err := c.Get(ctx, "lake", strings.TrimPrefix(p.URL, "s3://lake/")+"data.csv")
		return p, string(data), err
	}
	stop := make(chan struct{})
	var readerErr []string
	reads := 0
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		seen := map[string]int64{}
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, name := range pubs {
				for _, d := range days {
					p, data, err := read(name, d)
					if errors.Is(err, objstore.ErrNotFound) && p.URL == "" {
						continue // not published yet
					}
					reads++
					want := fmt.Sprintf("id,interval,task\n1,%sT00:00:00Z,%s\n", d, name)
					if err != nil || data != want {
						readerErr = append(readerErr, fmt.Sprintf("%s/%s: read %q, %v; want %q", name, d, data, err, want))
						continue
					}
					if p.Token < seen[name+d] {
						readerErr = append(readerErr, fmt.Sprintf("%s/%s: token %d visible after %d", name, d, p.Token, seen[name+d]))
					}
					seen[name+d] = max(seen[name+d], p.Token)
				}
			}
		}
	}()
	progress := func(n int) func(queue.RunStatus) bool {
		return func(queue.RunStatus) bool {
			done := 0
			for _, r := range runs {
				rs, err := e.st.Status(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				for _, ts := range rs.Tasks {
					if ts.State == queue.WorkSucceeded {
						done++
					}
				}
			}
			return done >= n
		}
	}
	e.until(runs[0], "some progress", progress(40))
	w2.Signal(t, syscall.SIGSTOP)
	e.until(runs[0], "more progress", progress(100))
	w3.Signal(t, syscall.SIGKILL)
	e.worker("w4", "--slots", "2")
	e.until(runs[0], "more progress still", progress(180))
	w2.Signal(t, syscall.SIGCONT)
	for _, r := range runs {
		if rs := e.until(r, "the end of "+r, finished); rs.Run.State != store.RunSucceeded {
			var bad []string
			for _, ts := range rs.Tasks {
				if ts.State != queue.WorkSucceeded {
					bad = append(bad, ts.Task+" "+ts.State+": "+ts.Reason)
				}
			}
			t.Fatalf("run %s %s: %v", r, rs.Run.State, bad)
		}
	}
	close(stop)
	wg.Wait()
	if len(readerErr) > 0 {
		t.Fatalf("the reader saw %d bad reads of %d, first: %s", len(readerErr), reads, readerErr[0])
	}
	for _, name := range pubs {
		for _, d := range days {
			sp, err := e.st.Pointer(ctx, "chaos", "s_"+name, "a_"+name, d)
			if err != nil {
				t.Fatal(err)
			}
			p, data, err := read(name, d)
			if err != nil || p.Token != sp.Token || !strings.Contains(data, name) {
				t.Fatalf("%s/%s: visible token %d %q (%v), the store's pointer %d", name, d, p.Token, data, err, sp.Token)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "warehouse")); !os.IsNotExist(err) {
		t.Errorf("a local warehouse folder was made: %v", err)
	}
	lost := 0
	for _, r := range runs {
		evs, err := e.st.Events(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Kind == queue.EventWorkLeaseLost {
				lost++
			}
		}
	}
	if lost == 0 {
		t.Fatal("no claim was ever taken over: the signals hit idle workers")
	}
	t.Logf("%d reads, all complete and current; %d claims taken over", reads, lost)
}

// TestS3RestartsMidRun: the object store holding the artifacts and every
// sink (versitygw) is stopped for 3 s, then started again on its port,
// twice while 2 workers run a 100-task pipeline (10 layers of 10, every
// other layer publishing to its own fenced s3 sink). Puts, fetches and
// publishes sent meanwhile wait for it: the run succeeds, and every
// pointer is the store's. (Before, each request failed after the SDK's
// three tries, within milliseconds, and with it the task and the run.)
func TestS3RestartsMidRun(t *testing.T) {
	srv, e, pubs := newS3ChaosEnv(t)
	e.worker("w1", "--slots", "2")
	e.worker("w2", "--slots", "2")
	const day = "2024-01-01"
	run := e.submit(day)
	for _, n := range []int{20, 50} {
		e.until(run, fmt.Sprintf("%d tasks done", n), func(rs queue.RunStatus) bool {
			return succeeded(rs) >= n || rs.Run.State != store.RunRunning
		})
		srv.Stop()
		time.Sleep(3 * time.Second)
		srv.Restart()
	}
	if rs := e.until(run, "the run's end", finished); rs.Run.State != store.RunSucceeded {
		var bad []string
		for _, ts := range rs.Tasks {
			if ts.State != queue.WorkSucceeded {
				bad = append(bad, ts.Task+" "+ts.State+": "+ts.Reason)
			}
		}
		t.Fatalf("run %s %s: %v", run, rs.Run.State, bad)
	}
	ctx := context.Background()
	c := srv.Client()
	if err := scenario.S3PointersAgree(ctx, c, e.st, pubs, day); err != nil {
		t.Fatal(err)
	}
}

// succeeded counts the run's succeeded tasks.
func succeeded(rs queue.RunStatus) int {
	n := 0
	for _, ts := range rs.Tasks {
		if ts.State == queue.WorkSucceeded {
			n++
		}
	}
	return n
}
