// Package specdetect tells pipeline specs from other HCL and CUE files, for
// the command line (folder walks, --skip-non-specs) and the language server
// (which stays silent on Terraform and Packer files) alike.
package specdetect

import (
	"bytes"
	"regexp"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/pipec/pipec/internal/suggest"
	"github.com/pipec/pipec/spec"
)

// IsPipeline decides, by parsing, whether a .hcl file holds a pipeline: the
// file's top level has a `pipeline` block, with quoted or bare labels
// (`pipeline "orders" {` and `pipeline orders {` alike). Terraform, Terragrunt
// and Packer files have no such block, so a repository can keep them beside
// its specs. CUE files are judged by cuespec.IsPipeline (specload.IsPipeline
// takes both): this package does not link CUE, for programs that read only
// HCL.
//
// HCL is judged from the lexer's tokens, which exist even for a file that does
// not parse, so a spec with a syntax error is still a spec (and its error is
// still reported). A top-level block whose name is one typo away from
// `pipeline` counts too, so `pipelin "orders" {` is reported, not skipped.
// Binary files (a NUL byte, or not UTF-8) are never specs.
func IsPipeline(syn spec.Syntax, src []byte) bool {
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))
	if syn != spec.SyntaxHCL || IsBinary(src) {
		return false
	}
	return hclHasPipelineBlock(src)
}

// IsBinary reports whether src cannot be a text spec.
func IsBinary(src []byte) bool {
	head := src[:min(len(src), 8000)]
	return bytes.IndexByte(head, 0) >= 0 || !utf8.Valid(src)
}

// hclPipelineHeader is a pipeline block header at the start of a line, as
// every formatted spec writes it.
var hclPipelineHeader = regexp.MustCompile(`(?m)^pipeline[ \t]+(?:"[^"\n]*"|[A-Za-z_][A-Za-z0-9_-]*)[ \t]*\{`)

// hclHasPipelineBlock lexes only the text up to the first header that looks
// like a pipeline block when there is one: the tokens of a prefix are those
// of the whole file, so a block found there is found in the whole file, and
// a 10,000-task spec (a megabyte) is judged in microseconds instead of the
// half second a full lex takes. Otherwise (a typo, a block not at the start
// of a line, a header inside a heredoc) the whole file is lexed.
func hclHasPipelineBlock(src []byte) bool {
	if loc := hclPipelineHeader.FindIndex(src); loc != nil {
		if toks, ds := hclsyntax.LexConfig(src[:loc[1]], "", hcl.InitialPos); !ds.HasErrors() && closedPrefix(toks) && tokensHavePipelineBlock(toks) {
			return true
		}
	}
	return hclLexHasPipelineBlock(src)
}

// closedPrefix reports whether a prefix's tokens leave no multi-line
// construct open: a block comment that the rest of the file would close
// (lexed alone, its opening is '/' '*'), or a heredoc. Only then are its
// tokens those of the whole file.
func closedPrefix(toks hclsyntax.Tokens) bool {
	heredocs := 0
	for i, t := range toks {
		switch t.Type {
		case hclsyntax.TokenOHeredoc:
			heredocs++
		case hclsyntax.TokenCHeredoc:
			heredocs--
		case hclsyntax.TokenInvalid, hclsyntax.TokenBadUTF8, hclsyntax.TokenNil:
			return false
		case hclsyntax.TokenSlash:
			if i+1 < len(toks) && toks[i+1].Type == hclsyntax.TokenStar {
				return false
			}
		}
	}
	return heredocs == 0
}

func hclLexHasPipelineBlock(src []byte) bool {
	toks, _ := hclsyntax.LexConfig(src, "", hcl.InitialPos)
	return tokensHavePipelineBlock(toks)
}

func tokensHavePipelineBlock(toks hclsyntax.Tokens) bool {
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
			if depth == 0 && lineStart && IsPipelineWord(string(t.Bytes)) && blockFollows(toks[i+1:]) {
				return true
			}
		}
		// A line comment's token holds its newline; no TokenNewline follows.
		lineStart = t.Type == hclsyntax.TokenNewline ||
			(t.Type == hclsyntax.TokenComment && bytes.HasSuffix(t.Bytes, []byte("\n")))
	}
	return false
}

// IsPipelineWord accepts "pipeline" and its one-edit typos.
func IsPipelineWord(w string) bool {
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
