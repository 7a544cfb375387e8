package artifacts

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pipec/pipec/runtime/sink"
)

// frozen writes a small version into a fresh folder and returns the folder
// and its key, as the runtime has them after sink.Freeze.
func frozen(t *testing.T, content string) (string, Key) {
	t.Helper()
	return frozenIn(t, t.TempDir(), content)
}

// frozenIn is frozen with the frozen folder under root.
func frozenIn(t *testing.T, root, content string) (string, Key) {
	t.Helper()
	staging := t.TempDir()
	if err := os.MkdirAll(filepath.Join(staging, "part"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"orders.csv": content, "part/extra.txt": "x\n"} {
		if err := os.WriteFile(filepath.Join(staging, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir, digest, err := sink.Freeze(staging, filepath.Join(root, "local"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKey("orders", "orders_clean", digest)
	if err != nil {
		t.Fatal(err)
	}
	return dir, k
}

func newFolder(t *testing.T) *Folder {
	t.Helper()
	f, err := NewFolder(filepath.Join(t.TempDir(), "shared"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// names lists what is under dir, with slashes, sorted by the walk.
func names(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFolderPutGet: a put version is at its key, with the same bytes, every
// file read-only, and the state's location names it; putting it again
// changes nothing.
func TestFolderPutGet(t *testing.T) {
	ctx := context.Background()
	f := newFolder(t)
	dir, k := frozen(t, "id\n1\n")
	if err := f.Put(ctx, k, dir); err != nil {
		t.Fatal(err)
	}
	got, err := f.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(f.Root, "orders", "orders_clean", strings.TrimPrefix(k.Digest, "sha256:")); got != want {
		t.Errorf("Get = %s, want %s", got, want)
	}
	if d, err := sink.Digest(got); err != nil || d != k.Digest {
		t.Errorf("stored digest = %s, %v; want %s", d, err, k.Digest)
	}
	if b, err := os.ReadFile(filepath.Join(got, "orders.csv")); err != nil || string(b) != "id\n1\n" {
		t.Errorf("orders.csv = %q, %v", b, err)
	}
	for _, name := range []string{"orders.csv", "part/extra.txt"} {
		fi, err := os.Stat(filepath.Join(got, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o222 != 0 {
			t.Errorf("%s is writable: %v", name, fi.Mode())
		}
	}
	before, _ := os.Stat(filepath.Join(got, "orders.csv"))
	if err := f.Put(ctx, k, dir); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(filepath.Join(got, "orders.csv"))
	if !os.SameFile(before, after) {
		t.Error("a second put of the same key replaced the stored file")
	}
	keys, err := f.List(ctx)
	if err != nil || len(keys) != 1 || keys[0] != k {
		t.Errorf("List = %v, %v; want [%v]", keys, err, k)
	}
	loc, err := ParseKey(k.String())
	if err != nil || loc != k {
		t.Errorf("ParseKey(%q) = %v, %v", k.String(), loc, err)
	}
	if p, err := Files(ctx, f, k.String()); err != nil || p != got {
		t.Errorf("Files(%s) = %s, %v; want %s", k, p, err, got)
	}
}

// TestFolderConcurrentPuts: writers putting one digest at once (two workers
// whose attempts wrote the same bytes) all succeed, and the store holds one
// complete version and no temporary folder.
func TestFolderConcurrentPuts(t *testing.T) {
	ctx := context.Background()
	f := newFolder(t)
	const n = 8
	dirs := make([]string, n)
	var k Key
	for i := range dirs {
		dirs[i], k = frozen(t, "id\n1\n2\n")
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f.Put(ctx, k, dirs[i])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("put %d: %v", i, err)
		}
	}
	hex := strings.TrimPrefix(k.Digest, "sha256:")
	want := []string{".", "orders", "orders/orders_clean", "orders/orders_clean/" + hex,
		"orders/orders_clean/" + hex + "/orders.csv", "orders/orders_clean/" + hex + "/part",
		"orders/orders_clean/" + hex + "/part/extra.txt"}
	if got := names(t, f.Root); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("store holds\n%v\nwant\n%v", got, want)
	}
	got, _ := f.Get(ctx, k)
	if d, err := sink.Digest(got); err != nil || d != k.Digest {
		t.Errorf("stored digest = %s, %v; want %s", d, err, k.Digest)
	}
}

// TestFolderCrashLeftover: a put that died halfway (its temporary folder
// holds part of the version) is not visible: Get does not find the version,
// List leaves it out, Temps reports it for gc, and the next put stores the
// whole version.
func TestFolderCrashLeftover(t *testing.T) {
	ctx := context.Background()
	f := newFolder(t)
	dir, k := frozen(t, "id\n1\n")
	tmp := filepath.Join(f.Root, "orders", "orders_clean", ".tmp-123456")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "orders.csv"), []byte("id\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get(ctx, k); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get with only a leftover = %v, want ErrNotFound", err)
	}
	if keys, err := f.List(ctx); err != nil || len(keys) != 0 {
		t.Errorf("List = %v, %v; want none", keys, err)
	}
	temps, err := f.Temps()
	if err != nil || len(temps) != 1 || temps[0].Path != tmp {
		t.Errorf("Temps = %v, %v; want %s", temps, err, tmp)
	}
	if err := f.Put(ctx, k, dir); err != nil {
		t.Fatal(err)
	}
	got, err := f.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := sink.Digest(got); err != nil || d != k.Digest {
		t.Errorf("stored digest = %s, %v; want %s", d, err, k.Digest)
	}
}

// otherFilesystem is a folder on another filesystem than the test's
// temporary folders (/dev/shm), where a put must copy; the test is skipped
// where there is none.
func otherFilesystem(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "pipec-artifacts-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if sameFilesystem(dir, t.TempDir()) {
		t.Skip("/dev/shm is on the same filesystem as the temporary folder")
	}
	return dir
}

// TestFolderPutMoves: a frozen folder on the store's filesystem is moved in
// (no second copy); one on another filesystem is copied, and stays.
func TestFolderPutMoves(t *testing.T) {
	ctx := context.Background()
	f := newFolder(t)
	dir, k := frozen(t, "id\n1\n")
	if err := f.Put(ctx, k, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the frozen folder on the store's filesystem is still there: %v", err)
	}
	far, k2 := frozenIn(t, otherFilesystem(t), "id\n2\n")
	if err := f.Put(ctx, k2, far); err != nil {
		t.Fatal(err)
	}
	got, err := f.Get(ctx, k2)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := sink.Digest(got); err != nil || d != k2.Digest {
		t.Errorf("copied digest = %s, %v; want %s", d, err, k2.Digest)
	}
	if _, err := os.Stat(far); err != nil {
		t.Errorf("a copied folder was removed: %v", err)
	}
}

// TestFolderPutChecksDigest: a folder copied in whose content is not the
// key's (it changed after it was frozen) is refused, and the key stays
// absent.
func TestFolderPutChecksDigest(t *testing.T) {
	ctx := context.Background()
	f := newFolder(t)
	dir, _ := frozenIn(t, otherFilesystem(t), "id\n1\n")
	_, other := frozen(t, "id\n2\n")
	if err := f.Put(ctx, other, dir); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("put under another digest = %v, want a digest error", err)
	}
	if _, err := f.Get(ctx, other); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get = %v, want ErrNotFound", err)
	}
}

// TestFolderRemove: a removed version is gone, with no leftover; removing
// it again is no error.
func TestFolderRemove(t *testing.T) {
	ctx := context.Background()
	f := newFolder(t)
	dir, k := frozen(t, "id\n1\n")
	if err := f.Put(ctx, k, dir); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := f.Remove(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Get(ctx, k); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Remove = %v, want ErrNotFound", err)
	}
	if got := names(t, f.Root); strings.Join(got, " ") != ". orders orders/orders_clean" {
		t.Errorf("store holds %v after Remove", got)
	}
}

// TestKeys: a location is three safe path elements; anything else (a path
// that climbs out, a short digest, a path with more parts) is refused.
func TestKeys(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	for _, bad := range []string{"", "a/b", "../b/" + hex, "a/../" + hex, "a/b/" + hex[:10], "a/b/c/" + hex,
		"a/.b/" + hex, "a/b/" + strings.ToUpper(hex)} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted it", bad)
		}
	}
	if k, err := ParseKey("orders/orders_clean/" + hex); err != nil || k.Digest != "sha256:"+hex {
		t.Errorf("ParseKey = %v, %v", k, err)
	}
}

// TestFiles: an absolute location (a version a local run recorded before
// the artifact store) is read where it is; a key with no store configured
// is an error that says what to configure.
func TestFiles(t *testing.T) {
	ctx := context.Background()
	if p, err := Files(ctx, nil, "/old/state/versions/orders/x/"+strings.Repeat("0", 64)); err != nil || p != "/old/state/versions/orders/x/"+strings.Repeat("0", 64) {
		t.Errorf("Files(absolute) = %s, %v", p, err)
	}
	if _, err := Files(ctx, nil, "orders/x/"+strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "--artifacts") {
		t.Errorf("Files without a store = %v, want an error naming --artifacts", err)
	}
	if _, err := Open("s3://bucket/pipec"); err == nil || !strings.Contains(err.Error(), "s3://") {
		t.Errorf("Open(s3://) = %v, want a refusal naming it", err)
	}
	if _, err := Open("relative/dir"); err == nil {
		t.Error("Open accepted a relative folder")
	}
}

// A store whose folder is a file or a device is refused when opened, before
// a run starts a task; one not made yet is made at the first put.
func TestNewFolderRefusesAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "store")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{file, os.DevNull} {
		if _, err := NewFolder(root); err == nil || !strings.Contains(err.Error(), root+": not a folder") {
			t.Errorf("NewFolder(%s): %v", root, err)
		}
	}
	if _, err := NewFolder(filepath.Join(t.TempDir(), "later")); err != nil {
		t.Errorf("a folder not made yet: %v", err)
	}
}
