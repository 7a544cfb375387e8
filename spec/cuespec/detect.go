package cuespec

import (
	"bytes"
	"regexp"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"

	"github.com/pipec/pipec/internal/specdetect"
)

// IsPipeline decides, by parsing, whether a .cue file holds a pipeline: a
// top-level `pipeline` field (or a one-edit typo of it). A file that does not
// parse is judged by a line starting with `pipeline:`, so a spec with a
// syntax error is still a spec. Binary files are never specs. It is
// specdetect.IsPipeline's counterpart for CUE.
func IsPipeline(src []byte) bool {
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))
	if specdetect.IsBinary(src) {
		return false
	}
	return cueHasPipelineField(src)
}

// cuePipelineField finds `pipeline:` at the start of a line, for CUE files
// that do not parse.
var cuePipelineField = regexp.MustCompile(`(?m)^[ \t]*pipeline[ \t]*:`)

// cueTopPipeline is a pipeline field at the very start of a line.
var cueTopPipeline = regexp.MustCompile(`(?m)^pipeline[ \t]*:`)

// cueHasPipelineField parses only the text before the first line starting
// with `pipeline:` when there is one: if that prefix is complete CUE, the
// line starts a top-level field, which the whole file's parse (or, for a
// file that does not parse, the line pattern) finds too. A 10,000-task spec
// is then judged without parsing it.
func cueHasPipelineField(src []byte) bool {
	if loc := cueTopPipeline.FindIndex(src); loc != nil {
		if _, err := parser.ParseFile("", src[:loc[0]]); err == nil {
			return true
		}
	}
	return cueParseHasPipelineField(src)
}

func cueParseHasPipelineField(src []byte) bool {
	f, err := parser.ParseFile("", src)
	if err != nil {
		return cuePipelineField.Match(src)
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.Field)
		if !ok {
			continue
		}
		if name, _, err := ast.LabelName(fd.Label); err == nil && specdetect.IsPipelineWord(name) {
			return true
		}
	}
	return false
}
