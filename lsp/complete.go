package lsp

import (
	"slices"
	"strings"

	"go.lsp.dev/protocol"

	"github.com/pipec/pipec/spec"
)

// refFields maps, per element kind, the fields that hold a name to the kind
// of name they hold: the reference positions completion fills in.
var refFields = map[string]map[string]string{
	spec.KindTask:    {"depends_on": nameTask, "inputs": nameArtifact, "retry": namePolicy, "pool": namePool},
	spec.KindCheck:   {"input": nameArtifact},
	spec.KindPublish: {"artifact": nameArtifact, "sink": nameSink},
	spec.KindRetry:   {"on": nameClass},
}

// cursor is what a backward scan learns about the text before the cursor.
type cursor struct {
	frames   [][]string // the header words of each enclosing block, outermost first
	written  [][]string // per nesting level (0 is the file), the fields written there
	key      string     // the field whose value the cursor is in, if any
	value    bool       // after the field's '=' or ':'
	inString bool
	strStart int    // offset just after the opening quote
	word     string // the partial word before the cursor
}

func isWordByte(b byte) bool {
	return b == '_' || b == '-' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// scan reads src up to the cursor, tracking blocks, strings and comments
// well enough for completion: both syntaxes nest fields in braces, separate
// statements by newlines or commas, and give a field its value after '='
// (HCL) or ':' (CUE). It is a tolerant scanner, as the text being edited
// rarely parses.
func scan(src []byte, syn spec.Syntax) cursor {
	c := cursor{written: [][]string{nil}}
	var words []string
	var word []byte
	list := 0
	flush := func() {
		if len(word) > 0 {
			words = append(words, string(word))
			word = word[:0]
		}
	}
	reset := func() {
		flush()
		words, c.key, c.value = nil, "", false
	}
	sep := byte('=')
	if syn == spec.SyntaxCUE {
		sep = ':'
	}
	for i := 0; i < len(src); i++ {
		b := src[i]
		if c.inString {
			switch b {
			case '\\':
				i++
			case '"':
				c.inString = false
				words = append(words, string(src[c.strStart:i]))
			case '\n':
				c.inString = false
			}
			continue
		}
		switch {
		case b == '"':
			flush()
			c.inString, c.strStart = true, i+1
		case b == '#' && syn == spec.SyntaxHCL, b == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			i--
		case b == '/' && i+1 < len(src) && src[i+1] == '*':
			end := strings.Index(string(src[i+2:]), "*/")
			if end < 0 {
				return cursor{} // inside a comment: nothing to complete
			}
			i += end + 3
		case isWordByte(b):
			word = append(word, b)
		case b == sep:
			flush()
			if len(words) > 0 {
				c.key = words[len(words)-1]
				if list == 0 {
					top := len(c.written) - 1
					c.written[top] = append(c.written[top], c.key)
				}
			}
			c.value = true
		case b == '{':
			flush()
			if len(words) > 0 && !c.value {
				top := len(c.written) - 1 // an HCL block: `heartbeat {`, `task "x" {`
				c.written[top] = append(c.written[top], words[0])
			}
			c.frames = append(c.frames, words)
			c.written = append(c.written, nil)
			words, c.key, c.value, list = nil, "", false, 0
		case b == '}':
			if len(c.frames) > 0 {
				c.frames = c.frames[:len(c.frames)-1]
				c.written = c.written[:len(c.written)-1]
			}
			reset()
			list = 0
		case b == '[':
			flush()
			list++
		case b == ']':
			list = max(0, list-1)
		case b == '\n' || b == ',':
			if list == 0 {
				reset()
			}
		default:
			flush()
		}
	}
	if c.inString {
		c.word = string(src[c.strStart:])
	} else {
		c.word = string(word)
	}
	return c
}

// kindOf resolves the element kind of the innermost block from the header
// words of every enclosing block: `pipeline "x"` / `pipeline: x:`, then
// `task "t"` / `task: t:` (a labelled field takes the next word as its
// label), or `heartbeat` (a nested element). "" means not a known element.
func kindOf(frames [][]string) string {
	fields := spec.Fields()
	kind := "file"
	for _, words := range frames {
		for i := 0; i < len(words); i++ {
			w := words[i]
			if kind == "file" {
				if w != spec.KindPipeline || i+1 >= len(words) {
					return ""
				}
				kind = spec.KindPipeline
				i++
				continue
			}
			var found *spec.Field
			for j := range fields[kind] {
				if fields[kind][j].Name == w {
					found = &fields[kind][j]
				}
			}
			if found == nil || found.Nested == "" {
				return ""
			}
			if found.Labelled {
				if i+1 >= len(words) {
					return "" // `task: {` holds labels, not fields
				}
				i++
			}
			kind = found.Nested
		}
	}
	if kind == "file" {
		return ""
	}
	return kind
}

// completion offers names in reference positions (inside the string of a
// depends_on, inputs, retry, pool, input, artifact, sink or on) and field
// names at the start of a statement inside a block.
func (s *Server) completion(p *protocol.CompletionParams) (*protocol.CompletionList, error) {
	a := s.current(p.TextDocument.URI)
	if a == nil || !a.pipeline {
		return nil, nil
	}
	off := a.lines.offset(p.Position)
	c := scan(a.src[:off], a.syn)
	kind := kindOf(c.frames)
	if kind == "" {
		return nil, nil
	}
	list := &protocol.CompletionList{Items: []protocol.CompletionItem{}}
	replace := a.lines.span(off-len(c.word), off)
	if c.value {
		target := refFields[kind][c.key]
		if target == "" {
			return list, nil
		}
		for _, name := range a.syms().names(target) {
			text := name
			if !c.inString {
				text = `"` + name + `"`
			}
			list.Items = append(list.Items, protocol.CompletionItem{
				Label: name, Kind: protocol.CompletionItemKindReference, Detail: target,
				TextEdit: &protocol.TextEdit{Range: replace, NewText: text},
			})
		}
		return list, nil
	}
	if c.inString {
		return list, nil
	}
	docs := s.schemaDocs()
	written := c.written[len(c.written)-1]
	for _, f := range spec.Fields()[kind] {
		if !f.Labelled && slices.Contains(written, f.Name) {
			continue // a field is written once per block
		}
		item := protocol.CompletionItem{Label: f.Name, Kind: protocol.CompletionItemKindField,
			TextEdit: &protocol.TextEdit{Range: replace, NewText: f.Name}}
		if doc := docs.describe(kind, f.Name); doc != "" {
			item.Documentation = protocol.MarkupContent{Kind: protocol.Markdown, Value: doc}
		}
		if f.Required {
			item.Detail = "required"
		}
		list.Items = append(list.Items, item)
	}
	return list, nil
}
