package objstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"

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
	if !slices.Contains(objstore.Secrets(), s3test.SecretKey) {
		t.Fatal("Secrets does not hold the secret access key")
	}
	objs, dirs, err := c.List(ctx, "bkt", "some/", "/")
	if err != nil || len(objs) != 0 || !slices.Equal(dirs, []string{"some/prefix/"}) {
		t.Fatalf("list: %v %v %v", objs, dirs, err)
	}
}
