package lsp

import (
	"fmt"
	"strconv"
	"strings"

	"go.lsp.dev/protocol"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/spec"
)

// builtinClasses explains the error classes the runtime assigns itself.
var builtinClasses = map[string]string{
	"timeout": "built-in error class: the runtime killed the attempt at its timeout (transient: retried by a policy without `on`, or with `on` naming it)",
	"killed":  "built-in error class: the attempt was ended by a signal no class of the spec explained (transient)",
}

// Explain is the text `pipec explain RULE` prints, shown on hover over a
// finding. ok is false for an unknown rule.
func Explain(rule string) (text string, ok bool) {
	r := lint.Lookup(rule)
	if r == nil {
		return "", false
	}
	return lint.Explanation(r), true
}

// hover shows, at a position: the findings there with their rule's
// documentation; what a name refers to; what a field means.
func (s *Server) hover(p *protocol.HoverParams) (*protocol.Hover, error) {
	a := s.current(p.TextDocument.URI)
	if a == nil || !a.pipeline {
		return nil, nil
	}
	off := a.lines.offset(p.Position)
	var parts []string
	var rng *protocol.Range
	for _, f := range a.diags {
		r := a.lines.rangeOf(f.Range)
		s, e := a.lines.offset(r.Start), a.lines.offset(r.End)
		if off < s || off > e {
			continue
		}
		text := fmt.Sprintf("**%s** `%s`: %s", f.Severity, f.Rule, f.Message)
		if doc, ok := Explain(f.Rule); ok {
			text += "\n\n```text\n" + doc + "```"
		}
		parts = append(parts, text)
		rng = &r
	}
	if o := a.syms().at(off); o != nil {
		parts = append(parts, a.describe(o))
		r := a.lines.span(o.start, o.end)
		rng = &r
	} else if kind, field, r, ok := a.fieldAt(off); ok {
		if doc := s.schemaDocs().describe(kind, field); doc != "" {
			parts = append(parts, doc)
			rng = &r
		}
	}
	if len(parts) == 0 {
		return nil, nil
	}
	return &protocol.Hover{Contents: protocol.MarkupContent{Kind: protocol.Markdown, Value: strings.Join(parts, "\n\n---\n\n")}, Range: rng}, nil
}

func (s *Server) schemaDocs() *schemaDocs {
	s.schemaOnce.Do(func() { s.schema = loadSchemaDocs() })
	return s.schema
}

// describe says what a name refers to.
func (a *analysis) describe(o *occurrence) string {
	sp := a.spec
	var b strings.Builder
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "\n- %s: %s", k, v)
		}
	}
	switch o.kind {
	case nameTask:
		fmt.Fprintf(&b, "task `%s`", o.name)
		t := findTask(sp, o.name)
		if t == nil {
			b.WriteString(": not defined in this pipeline")
			break
		}
		describeTask(t, line)
	case nameArtifact:
		fmt.Fprintf(&b, "artifact `%s`", o.name)
		t := producer(sp, o.name)
		if t == nil {
			b.WriteString(": no task outputs it")
			break
		}
		fmt.Fprintf(&b, ", output of task `%s`", t.Name)
		describeTask(t, line)
	case namePolicy:
		fmt.Fprintf(&b, "retry policy `%s`", o.name)
		for i := range sp.Retries {
			r := &sp.Retries[i]
			if r.Name != o.name {
				continue
			}
			pr := compiler.ResolveRetry(r)
			b.WriteString(" (values with defaults applied)")
			mark := func(field string) string {
				if r.Has(field) {
					return ""
				}
				return " (default)"
			}
			attempts := strconv.Itoa(pr.MaxAttempts)
			if pr.MaxAttempts == 0 {
				attempts = "0 (unlimited)"
			}
			line("max_attempts", attempts+mark("max_attempts"))
			line("initial", pr.Initial+mark("initial"))
			line("multiplier", strconv.FormatFloat(pr.Multiplier, 'g', -1, 64)+mark("multiplier"))
			line("max_delay", pr.MaxDelay+mark("max_delay"))
			line("jitter", pr.Jitter+mark("jitter"))
			elapsed := pr.MaxElapsed
			if elapsed == "" {
				elapsed = "unbounded (default)"
			}
			line("max_elapsed", elapsed)
			on := "every failure (default)"
			if len(pr.On) > 0 {
				on = strings.Join(pr.On, ", ")
			}
			line("on", on)
			return b.String()
		}
		b.WriteString(": not defined in this pipeline")
	case namePool:
		fmt.Fprintf(&b, "pool `%s`", o.name)
		for _, pl := range sp.Pools {
			if pl.Name == o.name {
				line("slots", strconv.Itoa(pl.Slots))
				return b.String()
			}
		}
		b.WriteString(": not defined in this pipeline")
	case nameClass:
		fmt.Fprintf(&b, "error class `%s`", o.name)
		for _, e := range sp.Errors {
			if e.Name == o.name {
				codes := make([]string, len(e.ExitCodes))
				for i, c := range e.ExitCodes {
					codes[i] = strconv.Itoa(c)
				}
				line("exit_codes", strings.Join(codes, ", "))
				line("match", quoteAll(e.Match))
				line("deterministic", strconv.FormatBool(e.Deterministic))
				return b.String()
			}
		}
		if doc, ok := builtinClasses[o.name]; ok {
			b.WriteString(": " + doc)
			break
		}
		b.WriteString(": not defined in this pipeline")
	case nameSink:
		fmt.Fprintf(&b, "sink `%s`", o.name)
		for i := range sp.Sinks {
			sk := &sp.Sinks[i]
			if sk.Name == o.name {
				line("type", sk.Type)
				line("path", sk.Path)
				f := string(compiler.SinkFencing(sk))
				if sk.Fencing == "" {
					f += " (default for this type)"
				}
				line("fencing", f)
				return b.String()
			}
		}
		b.WriteString(": not defined in this pipeline")
	case nameCheck:
		fmt.Fprintf(&b, "check `%s`", o.name)
		for _, c := range sp.Checks {
			if c.Name == o.name {
				line("input", c.Input.Name)
			}
		}
	case namePublish:
		fmt.Fprintf(&b, "publish `%s`", o.name)
		for _, pub := range sp.Publishes {
			if pub.Name == o.name {
				line("artifact", pub.Artifact.Name)
				line("sink", pub.Sink.Name)
			}
		}
	}
	return b.String()
}

func describeTask(t *spec.Task, line func(k, v string)) {
	line("command", "`"+strings.Join(t.Command, " ")+"`")
	ins := make([]string, len(t.Inputs))
	for i, in := range t.Inputs {
		ins[i] = in.Artifact
		if in.Offset != 0 {
			ins[i] += "@" + strconv.Itoa(in.Offset)
		}
	}
	line("inputs", strings.Join(ins, ", "))
	outs := make([]string, len(t.Outputs))
	for i, o := range t.Outputs {
		outs[i] = o.Name
	}
	line("outputs", strings.Join(outs, ", "))
	if t.Retry != nil {
		line("retry", t.Retry.Name)
	}
	if t.Pool != nil {
		line("pool", t.Pool.Name)
	}
}

func findTask(sp *spec.Pipeline, name string) *spec.Task {
	for i := range sp.Tasks {
		if sp.Tasks[i].Name == name {
			return &sp.Tasks[i]
		}
	}
	return nil
}

func producer(sp *spec.Pipeline, artifact string) *spec.Task {
	for i := range sp.Tasks {
		for _, o := range sp.Tasks[i].Outputs {
			if o.Name == artifact {
				return &sp.Tasks[i]
			}
		}
	}
	return nil
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

// fieldAt finds the field name under an offset: an attribute or nested block
// the author wrote, or the keyword of an element header (`task` in HCL's
// `task "x" {`). kind is the element kind the field belongs to.
func (a *analysis) fieldAt(off int) (kind, field string, r protocol.Range, ok bool) {
	sp := a.spec
	if sp == nil {
		return "", "", r, false
	}
	try := func(k string, attrs spec.Attrs) bool {
		for name, ar := range attrs.Ranges {
			if strings.Contains(name, ".") {
				continue
			}
			s := a.lines.pipecOffset(ar.Start)
			if off < s || off > s+len(name) || s+len(name) > len(a.src) || string(a.src[s:s+len(name)]) != name {
				continue
			}
			kind, field, r, ok = k, name, a.lines.span(s, s+len(name)), true
			return true
		}
		return false
	}
	header := func(k string, n *spec.Named) bool {
		s := a.lines.pipecOffset(n.Range.Start)
		if a.syn == spec.SyntaxCUE {
			// `task: extract:`: the range is the label; the keyword is the
			// field before it.
			s = cueKeywordStart(a.src, a.lines.pipecOffset(n.NameRange.Start), k)
		}
		if off >= s && off <= s+len(k) && s+len(k) <= len(a.src) && string(a.src[s:s+len(k)]) == k {
			kind, field, r, ok = spec.KindPipeline, k, a.lines.span(s, s+len(k)), true
			return true
		}
		return try(k, n.Attrs)
	}
	if try(spec.KindPipeline, sp.Attrs) {
		return
	}
	if sp.Schedule != nil && try(spec.KindSchedule, sp.Schedule.Attrs) {
		return
	}
	if sp.RetryBudget != nil && try(spec.KindRetryBudget, sp.RetryBudget.Attrs) {
		return
	}
	for i := range sp.Pools {
		if header(spec.KindPool, &sp.Pools[i].Named) {
			return
		}
	}
	for i := range sp.Errors {
		if header(spec.KindError, &sp.Errors[i].Named) {
			return
		}
	}
	for i := range sp.Retries {
		if header(spec.KindRetry, &sp.Retries[i].Named) {
			return
		}
	}
	for i := range sp.Tasks {
		t := &sp.Tasks[i]
		if header(spec.KindTask, &t.Named) ||
			(t.Heartbeat != nil && try(spec.KindHeartbeat, t.Heartbeat.Attrs)) ||
			(t.Failover != nil && try(spec.KindFailover, t.Failover.Attrs)) {
			return
		}
	}
	for i := range sp.Checks {
		if header(spec.KindCheck, &sp.Checks[i].Named) {
			return
		}
	}
	for i := range sp.Sinks {
		if header(spec.KindSink, &sp.Sinks[i].Named) {
			return
		}
	}
	for i := range sp.Publishes {
		if header(spec.KindPublish, &sp.Publishes[i].Named) {
			return
		}
	}
	return "", "", r, false
}

// cueKeywordStart returns where keyword starts when it is the CUE field
// written just before the label at label (`task: extract`), or label.
func cueKeywordStart(src []byte, label int, keyword string) int {
	j := label
	for j > 0 && (src[j-1] == ' ' || src[j-1] == '\t') {
		j--
	}
	if j == 0 || src[j-1] != ':' {
		return label
	}
	j--
	if j >= len(keyword) && string(src[j-len(keyword):j]) == keyword {
		return j - len(keyword)
	}
	return label
}
