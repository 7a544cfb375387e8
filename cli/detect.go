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

// candidateLine finds lines that start with a word, the only places a
// top-level block can start.
var candidateLine = regexp.MustCompile(`(?m)^[ \t]*([A-Za-z_][A-Za-z0-9_-]*)[ \t"{]`)

// hclHasPipelineBlock looks only at lines that start with "pipeline" (or a
// typo of it), and lexes the file up to such a line to learn whether it is at
// the top level: most specs say so on their first line, and a Terraform file
// is never lexed at all, so detection costs little beside loading.
func hclHasPipelineBlock(src []byte) bool {
	for _, m := range candidateLine.FindAllSubmatchIndex(src, -1) {
		if !isPipelineWord(string(src[m[2]:m[3]])) {
			continue
		}
		end := len(src)
		if i := bytes.IndexByte(src[m[2]:], '\n'); i >= 0 {
			end = m[2] + i + 1
		}
		found, sure := topLevelBlockAt(src[:end], m[2])
		if !sure {
			// The prefix cut a comment or heredoc open: lex the whole file.
			found, _ = topLevelBlockAt(src, m[2])
		}
		if found {
			return true
		}
	}
	return false
}

// topLevelBlockAt lexes prefix and reports whether the identifier at byte
// offset at starts a line at depth 0 and is followed by labels and a brace.
// sure is false when the prefix may have cut a construct open (a block
// comment the lexer then reads as '/' '*', an invalid token), so that only
// the whole file can tell.
func topLevelBlockAt(prefix []byte, at int) (found, sure bool) {
	toks, _ := hclsyntax.LexConfig(prefix, "", hcl.InitialPos)
	depth := 0
	lineStart := true
	sure = true
	for i, t := range toks {
		if t.Range.Start.Byte == at {
			return t.Type == hclsyntax.TokenIdent && depth == 0 && lineStart && blockFollows(toks[i+1:]), sure
		}
		switch t.Type {
		case hclsyntax.TokenInvalid, hclsyntax.TokenBadUTF8:
			sure = false
		case hclsyntax.TokenStar:
			if i > 0 && toks[i-1].Type == hclsyntax.TokenSlash && toks[i-1].Range.End.Byte == t.Range.Start.Byte {
				sure = false
			}
		}
		switch t.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen,
			hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			depth++
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenTemplateSeqEnd:
			depth = max(0, depth-1)
		}
		// A line comment's token holds its newline; no TokenNewline follows.
		lineStart = t.Type == hclsyntax.TokenNewline ||
			(t.Type == hclsyntax.TokenComment && bytes.HasSuffix(t.Bytes, []byte("\n")))
	}
	return false, sure
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
