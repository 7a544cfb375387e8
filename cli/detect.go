package cli

import (
	"bytes"
	"regexp"
	"unicode/utf8"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/pipec/pipec/internal/suggest"
	"github.com/pipec/pipec/spec"
)

// isPipelineSpec decides, by parsing, whether a .hcl or .cue file holds a
// pipeline: the file's top level has a `pipeline` block (HCL, with quoted or
// bare labels: `pipeline "orders" {` and `pipeline orders {` alike) or a
// `pipeline` field (CUE). Terraform, Terragrunt and Packer files have no such
// block, so a repository can keep them beside its specs.
//
// HCL is judged from the lexer's tokens, which exist even for a file that does
// not parse, so a spec with a syntax error is still a spec (and its error is
// still reported). A top-level block whose name is one typo away from
// `pipeline` counts too, so `pipelin "orders" {` is reported, not skipped.
// Binary files (a NUL byte, or not UTF-8) are never specs.
func isPipelineSpec(syn spec.Syntax, src []byte) bool {
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))
	if isBinary(src) {
		return false
	}
	if syn == spec.SyntaxHCL {
		return hclHasPipelineBlock(src)
	}
	return cueHasPipelineField(src)
}

// isBinary reports whether src cannot be a text spec.
func isBinary(src []byte) bool {
	head := src[:min(len(src), 8000)]
	return bytes.IndexByte(head, 0) >= 0 || !utf8.Valid(src)
}

func hclHasPipelineBlock(src []byte) bool {
	toks, _ := hclsyntax.LexConfig(src, "", hcl.InitialPos)
	depth := 0
	lineStart := true
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch t.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen,
			hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			depth++
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenTemplateSeqEnd:
			depth = max(0, depth-1)
		case hclsyntax.TokenIdent:
			if depth == 0 && lineStart && isPipelineWord(string(t.Bytes)) && blockFollows(toks[i+1:]) {
				return true
			}
		}
		// A line comment's token holds its newline; no TokenNewline follows.
		lineStart = t.Type == hclsyntax.TokenNewline ||
			(t.Type == hclsyntax.TokenComment && bytes.HasSuffix(t.Bytes, []byte("\n")))
	}
	return false
}

// isPipelineWord accepts "pipeline" and its one-edit typos.
func isPipelineWord(w string) bool {
	if w == "pipeline" {
		return true
	}
	c, ok := suggest.Closest(w, []string{"pipeline"})
	return ok && c == "pipeline" && len(w) >= 6
}

// blockFollows reports whether the tokens after a block type are labels
// (quoted or bare) and then an opening brace.
func blockFollows(toks hclsyntax.Tokens) bool {
	for i := 0; i < len(toks); i++ {
		switch toks[i].Type {
		case hclsyntax.TokenOBrace:
			return true
		case hclsyntax.TokenIdent:
		case hclsyntax.TokenOQuote:
			i++
			for i < len(toks) && toks[i].Type == hclsyntax.TokenQuotedLit {
				i++
			}
			if i >= len(toks) || toks[i].Type != hclsyntax.TokenCQuote {
				return false
			}
		default:
			return false
		}
	}
	return false
}

// cuePipelineField finds `pipeline:` at the start of a line, for CUE files
// that do not parse.
var cuePipelineField = regexp.MustCompile(`(?m)^[ \t]*pipeline[ \t]*:`)

func cueHasPipelineField(src []byte) bool {
	f, err := parser.ParseFile("", src)
	if err != nil {
		return cuePipelineField.Match(src)
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.Field)
		if !ok {
			continue
		}
		if name, _, err := ast.LabelName(fd.Label); err == nil && isPipelineWord(name) {
			return true
		}
	}
	return false
}
