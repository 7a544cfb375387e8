package spec

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
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

// FuzzFastParse feeds arbitrary pieces to the direct tree builder: when it
// accepts one, hclsyntax must parse the same bytes without error, and both
// trees must decode to the same model and findings.
func FuzzFastParse(f *testing.F) {
	for _, path := range []string{"testdata/hcl/ok/full.hcl", "testdata/hcl/ok/orders.hcl"} {
		src, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		lay, ok := layoutHCL(src, 1)
		if !ok {
			f.Fatalf("%s: no layout", path)
		}
		for _, pc := range lay.pieces {
			f.Add(src[pc.start:pc.end])
		}
	}
	f.Add([]byte("a = [\"x\\\"y\\n\", \"\\\\\"]\n"))
	f.Fuzz(func(t *testing.T, piece []byte) {
		fast, ok := fastParse("fuzz.hcl", piece, 0, len(piece), 1)
		if !ok {
			return
		}
		slowL := &hclLoader{file: "fuzz.hcl"}
		slow, syntaxErr := slowL.parse(piece, hcl.Pos{Line: 1, Column: 1})
		if syntaxErr || len(slowL.ds) > 0 {
			t.Fatalf("fast path accepted what hclsyntax rejects: %v", slowL.ds)
		}
		fastL := &hclLoader{file: "fuzz.hcl"}
		want, got := slowL.decodePipelineBody(slow), fastL.decodePipelineBody(fast)
		if diff := cmp.Diff(want.p, got.p); diff != "" {
			t.Fatalf("models differ (-hclsyntax +fast):\n%s", diff)
		}
		if diff := cmp.Diff(slowL.ds.Sort(), fastL.ds.Sort()); diff != "" {
			t.Fatalf("findings differ (-hclsyntax +fast):\n%s", diff)
		}
	})
}
