package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/internal/s3test"
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
