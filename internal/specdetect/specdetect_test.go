package specdetect

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/internal/gendag"
	"github.com/pipec/pipec/spec"
)

// The fast path (a prefix lexed) decides as the full lex does, including where the header that looks like a pipeline is not one.
func TestFastPathAgreesWithFullParse(t *testing.T) {
	hcl := []string{
		"pipeline \"o\" {}\n",
		"# c\npipeline o {\n  task \"a\" {}\n}\n",
		"x = <<EOT\npipeline \"o\" {\nEOT\n",
		"x = <<EOT\npipeline \"o\" {\nEOT\npipeline \"p\" {\n}\n",
		"/*\npipeline \"o\" {\n*/\n",
		"resource \"a\" \"b\" {\npipeline \"p\" {}\n}\n",
		"locals {\n  a = \"x\"\n}\npipeline \"o\" {\n",
		"pipelin \"o\" {}\n",
		"pipeline \"o\" {\n  task \"a\" {\n    command = [\n",
		"  pipeline \"o\" {}\n",
		"terraform {}\n",
	}
	for _, src := range hcl {
		if fast, full := hclHasPipelineBlock([]byte(src)), hclLexHasPipelineBlock([]byte(src)); fast != full {
			t.Errorf("HCL %q: fast %v, full %v", src, fast, full)
		}
	}
}

// BenchmarkIsPipeline judges the 10,000-task benchmark DAG (internal/gendag).
//
//	go test -run '^$' -bench IsPipeline ./internal/specdetect/
func BenchmarkIsPipeline(b *testing.B) {
	d, err := gendag.Generate(10000, 42)
	if err != nil {
		b.Fatal(err)
	}
	files := d.Files()
	for _, f := range []string{"pipeline.hcl"} {
		src := files[f]
		syn, _ := spec.SyntaxOf(f)
		b.Run(strings.TrimPrefix(filepath.Ext(f), "."), func(b *testing.B) {
			for b.Loop() {
				if !IsPipeline(syn, src) {
					b.Fatalf("%s not recognised", f)
				}
			}
		})
	}
}
