package spec

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzLoadHCL feeds arbitrary bytes to the HCL loader. Whatever the input,
// loading must not panic, every finding must point into the file (a file name,
// a line and a column from 1), and cutting the pipeline body into pieces must
// give exactly what the one-piece parse gives.
func FuzzLoadHCL(f *testing.F) {
	for _, dir := range []string{"ok", "err"} {
		files, _ := filepath.Glob(filepath.Join("testdata", "hcl", dir, "*.hcl"))
		for _, path := range files {
			src, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(src)
		}
	}
	f.Add(genHCL(12))
	f.Fuzz(func(t *testing.T, src []byte) {
		p, ds := LoadHCL("fuzz.hcl", src)
		for _, d := range ds {
			if d.Range.Filename != "fuzz.hcl" || d.Range.Start.Line < 1 || d.Range.Start.Column < 1 {
				t.Fatalf("finding without a proper position: %#v", d)
			}
		}
		wantP, wantDs := loadWhole("fuzz.hcl", src)
		chunkP, chunkDs := loadHCL("fuzz.hcl", src, 1)
		if diff := cmp.Diff(wantP, chunkP); diff != "" {
			t.Fatalf("chunked model differs (-whole +chunked):\n%s", diff)
		}
		if diff := cmp.Diff(wantDs, chunkDs); diff != "" {
			t.Fatalf("chunked findings differ (-whole +chunked):\n%s", diff)
		}
		if diff := cmp.Diff(wantP, p); diff != "" {
			t.Fatalf("LoadHCL model differs from the one-piece load:\n%s", diff)
		}
	})
}
