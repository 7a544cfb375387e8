package specdetect

import (
	"os"
	"testing"

	"github.com/pipec/pipec/internal/tracked"
	"github.com/pipec/pipec/spec"
)

// TestIsPipelineSpec recognises specs by parsing: bare and quoted labels,
// comments and a broken body still count; Terraform, Packer and Terragrunt
// files, a `pipeline` attribute and binary files do not.
func TestIsPipelineSpec(t *testing.T) {
	for _, tc := range []struct {
		name string
		syn  spec.Syntax
		src  string
		want bool
	}{
		{"quoted", spec.SyntaxHCL, `pipeline "orders" {}`, true},
		{"bare label", spec.SyntaxHCL, "# orders\npipeline orders {\n}\n", true},
		{"after other blocks", spec.SyntaxHCL, "locals {\n  a = \"pipeline x {\"\n}\n\npipeline \"o\" {\n", true},
		{"broken body", spec.SyntaxHCL, "pipeline \"o\" {\n  task \"a\" {\n    command = [\n", true},
		{"typo", spec.SyntaxHCL, "pipelin \"orders\" {}\n", true},
		{"bom", spec.SyntaxHCL, "\xef\xbb\xbfpipeline \"o\" {}", true},
		{"terraform", spec.SyntaxHCL, "resource \"aws_s3_bucket\" \"b\" {\n  bucket = \"pipeline\"\n}\n", false},
		{"nested pipeline", spec.SyntaxHCL, "resource \"x\" \"y\" {\n  pipeline \"p\" {}\n}\n", false},
		{"in a heredoc", spec.SyntaxHCL, "locals {\n  doc = <<EOT\npipeline \"x\" {\nEOT\n}\n", false},
		{"in a block comment", spec.SyntaxHCL, "/*\npipeline \"x\" {\n*/\nresource \"a\" \"b\" {}\n", false},
		{"after a heredoc", spec.SyntaxHCL, "locals {\n  doc = <<EOT\n}\nEOT\n}\npipeline \"x\" {\n}\n", true},
		{"attribute", spec.SyntaxHCL, "pipeline = \"orders\"\n", false},
		{"terragrunt", spec.SyntaxHCL, "include \"root\" {\n  path = find_in_parent_folders()\n}\ninputs = {\n  pipeline = 1\n}\n", false},
		{"packer", spec.SyntaxHCL, "source \"amazon-ebs\" \"pipeline\" {\n}\nbuild {\n  sources = [\"source.amazon-ebs.pipeline\"]\n}\n", false},
		{"binary", spec.SyntaxHCL, "pipeline \"o\" {\x00\x01}", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsPipeline(tc.syn, []byte(tc.src)); got != tc.want {
				t.Errorf("IsPipeline(%q) = %v, want %v", tc.src, got, tc.want)
			}
		})
	}
}

// TestShippedExamplesAreSpecs keeps detection honest on real files: every
// example is found.
func TestShippedExamplesAreSpecs(t *testing.T) {
	files := tracked.Glob(t, "../..", "examples/*/*.hcl")
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		syn, _ := spec.SyntaxOf(f)
		if !IsPipeline(syn, src) {
			t.Errorf("%s is not recognised as a spec", f)
		}
	}
}

// FuzzPipelineDetection compares the fast detection with the whole-file lex on
// arbitrary text (go test runs the seeds; -fuzz explores).
func FuzzPipelineDetection(f *testing.F) {
	for _, s := range []string{
		`pipeline "x" {}`, "/*\npipeline \"x\" {\n*/\n", "a = <<EOT\npipeline x {\nEOT\n",
		"x = \"${\npipeline \"a\" {\n}\"\n", "  pipeline a b {\n", "pipeline = 1\n", "# c\npipelin \"o\" {",
		"a {\n}\n}\npipeline \"p\" {\n", "a = [\npipeline \"p\" {\n]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		if got, want := hclHasPipelineBlock(src), hclLexHasPipelineBlock(src); got != want {
			t.Errorf("fast %v, reference %v for %q", got, want, src)
		}
	})
}
