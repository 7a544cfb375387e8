package sink

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pipec/pipec/runtime/store"
)

// TestManifestLineage: every published folder holds _pipec.json with the
// version's lineage, written before the link named it; the content digest
// leaves it out; two attempts with the same bytes get two folders, each
// with its own manifest; an output holding the reserved name is refused.
func TestManifestLineage(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	d := f.sink(t, f.st, FencingToken)
	d.Lineage = func(v store.Version) (string, []ManifestCheck) {
		return "orders", []ManifestCheck{{Name: "orders_clean_ok", Run: v.Run}}
	}
	files := map[string]string{"orders_clean.csv": "id\n1\n2\n"}
	v1 := f.produce(t, f.st, "clean", "2024-01-01", files)
	if _, err := d.Publish(ctx, v1); err != nil {
		t.Fatal(err)
	}
	vis, err := d.Visible("2024-01-01")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ReadManifest(vis)
	if err != nil {
		t.Fatal(err)
	}
	want := Manifest{Schema: ManifestSchema, Pipeline: "orders", Artifact: "orders_clean", Interval: "2024-01-01",
		CodeVersion: "2024.06.1", Run: v1.Run, Task: "clean", Attempt: v1.Attempt, Token: v1.Token, Digest: v1.Digest,
		Checks: []ManifestCheck{{Name: "orders_clean_ok", Run: v1.Run}}}
	if m.Pipeline != want.Pipeline || m.Artifact != want.Artifact || m.Interval != want.Interval ||
		m.CodeVersion != want.CodeVersion || m.Run != want.Run || m.Task != want.Task || m.Attempt != want.Attempt ||
		m.Token != want.Token || m.Digest != want.Digest || !slices.Equal(m.Checks, want.Checks) {
		t.Errorf("manifest = %+v\nwant %+v", m, want)
	}
	if got, err := ContentDigest(vis); err != nil || got != v1.Digest {
		t.Errorf("content digest = %s, %v; want %s", got, err, v1.Digest)
	}
	if got, _ := Digest(vis); got == v1.Digest {
		t.Error("Digest of the folder with its manifest equals the content digest: the manifest was not written")
	}
	if fi, err := os.Stat(filepath.Join(vis, ManifestName)); err != nil || fi.Mode().Perm()&0o222 != 0 {
		t.Errorf("manifest not read-only: %v %v", fi, err)
	}

	// A second attempt with the same bytes and a higher token.
	v2 := f.produce(t, f.st, "clean", "2024-01-01", files)
	if v2.Digest != v1.Digest || v2.Token <= v1.Token {
		t.Fatalf("v2 = %+v", v2)
	}
	if _, err := d.Publish(ctx, v2); err != nil {
		t.Fatal(err)
	}
	vis2, err := d.Visible("2024-01-01")
	if err != nil {
		t.Fatal(err)
	}
	if vis2 == vis {
		t.Fatalf("same folder %s for two tokens", vis)
	}
	m2, err := ReadManifest(vis2)
	if err != nil || m2.Token != v2.Token || m2.Attempt != v2.Attempt {
		t.Errorf("second manifest = %+v, %v", m2, err)
	}
	if m, err := ReadManifest(vis); err != nil || m.Token != v1.Token {
		t.Errorf("first folder's manifest changed: %+v, %v", m, err)
	}

	// The reserved name in an output.
	v3 := f.produce(t, f.st, "clean", "2024-01-01", map[string]string{"orders_clean.csv": "id\n3\n", ManifestName: "{}"})
	if _, err := d.Publish(ctx, v3); err == nil || !strings.Contains(err.Error(), "reserves for the lineage manifest") {
		t.Errorf("publish with %s in the output: %v", ManifestName, err)
	}
	if vis3, _ := d.Visible("2024-01-01"); vis3 != vis2 {
		t.Errorf("visible moved to %s after a refused publish", vis3)
	}
}
