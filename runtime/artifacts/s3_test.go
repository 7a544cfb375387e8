package artifacts_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/s3test"
	"github.com/pipec/pipec/runtime/artifacts"
	"github.com/pipec/pipec/runtime/objstore"
	"github.com/pipec/pipec/runtime/sink"
)

// frozen freezes a small version with a subfolder, an empty folder and an
// executable file, and returns its folder and key.
func frozenVersion(t *testing.T, content string) (string, artifacts.Key) {
	t.Helper()
	staging := t.TempDir()
	os.MkdirAll(filepath.Join(staging, "part", "empty"), 0o755)
	os.WriteFile(filepath.Join(staging, "data.csv"), []byte(content), 0o644)
	os.WriteFile(filepath.Join(staging, "part", "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	dir, digest, err := sink.Freeze(staging, filepath.Join(t.TempDir(), "frozen"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := artifacts.NewKey("orders", "orders_clean", digest)
	if err != nil {
		t.Fatal(err)
	}
	return dir, k
}

// A version put by one worker is read by another, whose cache is empty,
// with its exact content (digest checked); a second put of the same key is
// a success; an upload without its marker is invisible; remove takes the
// marker first.
func TestS3Store(t *testing.T) {
	s3test.Start(t, "arts")
	ctx := context.Background()
	a, err := artifacts.OpenIn("s3://arts/pipec", filepath.Join(t.TempDir(), "cache-a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := artifacts.OpenIn("s3://arts/pipec", filepath.Join(t.TempDir(), "cache-b"), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir, k := frozenVersion(t, "id,amount\n1,10\n")
	if _, err := b.Get(ctx, k); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("get before put: %v, want ErrNotFound", err)
	}
	if err := a.Put(ctx, k, dir); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, b.(*artifacts.S3).Cache) {
		t.Fatalf("get returned %s, not in the reader's cache", got)
	}
	if d, err := sink.Digest(got); err != nil || d != k.Digest {
		t.Fatalf("downloaded digest %s %v, want %s", d, err, k.Digest)
	}
	if fi, err := os.Stat(filepath.Join(got, "part", "run.sh")); err != nil || fi.Mode()&0o111 == 0 || fi.Mode()&0o222 != 0 {
		t.Fatalf("run.sh: %v %v, want read-only and executable", fi.Mode(), err)
	}
	// A cached copy a task changed is dropped, and the next get downloads
	// the version again; the bucket's objects were not touched.
	if err := os.Rename(filepath.Join(got, "data.csv"), filepath.Join(got, "data.old")); err != nil {
		t.Fatal(err)
	}
	if err := b.Drop(ctx, k); err != nil {
		t.Fatal(err)
	}
	if got, err = b.Get(ctx, k); err != nil {
		t.Fatalf("get after the cached copy was dropped: %v", err)
	}
	if d, err := sink.Digest(got); err != nil || d != k.Digest {
		t.Fatalf("digest after the drop %s %v, want %s", d, err, k.Digest)
	}
	// A read from the cache marks the copy as read now (pipec gc keeps
	// what was read within a day).
	long := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(got, long, long); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, k); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(got); err != nil || time.Since(fi.ModTime()) > time.Minute {
		t.Errorf("a cached copy read now has the time %v, %v", fi.ModTime(), err)
	}
	// The same key again, from another worker's frozen copy: a success.
	dir2, k2 := frozenVersion(t, "id,amount\n1,10\n")
	if k2 != k {
		t.Fatal("same content, other key")
	}
	if err := b.Put(ctx, k2, dir2); err != nil {
		t.Fatalf("second put of one key: %v", err)
	}
	// An upload cut off before its marker is no version.
	_, k3 := frozenVersion(t, "id,amount\n2,20\n")
	c := a.(*artifacts.S3).Client
	if _, err := c.Put(ctx, "arts", "pipec/orders/orders_clean/"+strings.TrimPrefix(k3.Digest, "sha256:")+"/data.csv", []byte("id,amount\n2,2"), objstore.Cond{}); err != nil {
		t.Fatal(err)
	}
	keys, err := b.List(ctx)
	if err != nil || len(keys) != 1 || keys[0] != k {
		t.Fatalf("list: %v %v, want only %s", keys, err, k)
	}
	if _, err := b.Get(ctx, k3); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("get of an uncommitted version: %v, want ErrNotFound", err)
	}
	unc, err := a.(*artifacts.S3).Uncommitted(ctx)
	if err != nil || len(unc) != 1 || unc[0].Key != k3 || unc[0].Bytes == 0 {
		t.Fatalf("uncommitted: %v %v, want %s", unc, err, k3)
	}
	if err := a.Remove(ctx, k); err != nil {
		t.Fatal(err)
	}
	if keys, err := b.List(ctx); err != nil || len(keys) != 0 {
		t.Fatalf("list after remove: %v %v", keys, err)
	}
	fresh, _ := artifacts.OpenIn("s3://arts/pipec", filepath.Join(t.TempDir(), "cache-c"), nil)
	if _, err := fresh.Get(ctx, k); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("get after remove: %v, want ErrNotFound", err)
	}
}

// TestS3StoreServerStoppedMidPut: the server is stopped while a put uploads
// a version of many files, and started again: the version is not in the
// store (no marker: List and Get do not see it, Uncommitted does), and the
// put again completes it.
func TestS3StoreServerStoppedMidPut(t *testing.T) {
	srv := s3test.Start(t, "arts")
	ctx := context.Background()
	staging := t.TempDir()
	for i := range 400 {
		os.WriteFile(filepath.Join(staging, fmt.Sprintf("part-%03d.csv", i)), []byte(strings.Repeat("y", 4096)), 0o644)
	}
	dir, digest, err := sink.Freeze(staging, filepath.Join(t.TempDir(), "frozen"))
	if err != nil {
		t.Fatal(err)
	}
	k, _ := artifacts.NewKey("orders", "raw", digest)
	s, err := artifacts.NewS3(ctx, "s3://arts/p", filepath.Join(t.TempDir(), "cache"), nil)
	if err != nil {
		t.Fatal(err)
	}
	start := s.Client.RoundTrips()
	done := make(chan error, 1)
	// A server away for good: the put waits a moment, not the default's
	// half a minute.
	go func() { done <- s.Put(objstore.WaitingForServer(ctx, 200*time.Millisecond), k, dir) }()
	for s.Client.RoundTrips() < start+40 {
		time.Sleep(time.Millisecond)
	}
	srv.Stop()
	if err := <-done; err == nil {
		t.Fatal("the put succeeded with the server stopped mid-upload")
	}
	srv.Restart()
	if keys, err := s.List(ctx); err != nil || len(keys) != 0 {
		t.Fatalf("list after the cut put: %v %v", keys, err)
	}
	if _, err := s.Get(ctx, k); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("get after the cut put: %v", err)
	}
	if unc, err := s.Uncommitted(ctx); err != nil || len(unc) != 1 {
		t.Fatalf("uncommitted: %v %v", unc, err)
	}
	if err := s.Put(ctx, k, dir); err != nil {
		t.Fatal(err)
	}
	other, _ := artifacts.NewS3(ctx, "s3://arts/p", filepath.Join(t.TempDir(), "cache2"), nil)
	got, err := other.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := sink.Digest(got); err != nil || d != digest {
		t.Fatalf("digest %s %v", d, err)
	}
}

// TestS3StoreConcurrentPuts: 4 workers put one digest at once, each from
// its own frozen copy: every put succeeds and the version is there once.
func TestS3StoreConcurrentPuts(t *testing.T) {
	s3test.Start(t, "arts")
	ctx := context.Background()
	errs := make(chan error, 4)
	var key artifacts.Key
	for i := range 4 {
		dir, k := frozenVersion(t, "id\n1\n")
		key = k
		s, err := artifacts.OpenIn("s3://arts/p", filepath.Join(t.TempDir(), fmt.Sprint("cache", i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() { errs <- s.Put(ctx, k, dir) }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	s, _ := artifacts.OpenIn("s3://arts/p", filepath.Join(t.TempDir(), "reader"), nil)
	if keys, err := s.List(ctx); err != nil || len(keys) != 1 || keys[0] != key {
		t.Fatalf("list: %v %v", keys, err)
	}
	got, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := sink.Digest(got); err != nil || d != key.Digest {
		t.Fatalf("digest %s %v", d, err)
	}
}
