package lsp

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
)

// Name kinds: the namespaces a spec's references point into.
const (
	nameTask     = "task"
	nameArtifact = "artifact"
	nameCheck    = "check"
	nameSink     = "sink"
	namePublish  = "publish"
	namePolicy   = "retry"
	namePool     = "pool"
	nameClass    = "error"
)

// occurrence is one place a name is written: its definition (a task's label,
// the output that produces an artifact) or a reference to it.
type occurrence struct {
	kind, name string
	// start and end are byte offsets of the name itself, without quotes or an
	// "@-1" offset, so a rename replaces exactly the name.
	start, end int
	def        bool
	// attr is the field the reference is written in ("depends_on", "inputs").
	attr string
}

// symbols is every name occurrence of one spec, sorted by position.
type symbols struct {
	occ []occurrence
}

// buildSymbols collects the occurrences of a loaded pipeline. A name whose
// text cannot be found inside its range (an escaped string) is left out: it
// cannot be renamed safely, and a wrong range is worse than none.
func buildSymbols(p *spec.Pipeline, l *lines) *symbols {
	s := &symbols{}
	if p == nil {
		return s
	}
	add := func(kind, name string, r diag.Range, def bool, attr string) {
		if name == "" || r.Start.Line == 0 {
			return
		}
		start := l.pipecOffset(r.Start)
		end := len(l.src)
		if r.End.Line > 0 {
			end = max(start, l.pipecOffset(r.End))
		}
		i := bytes.Index(l.src[start:end], []byte(name))
		if i < 0 {
			return
		}
		s.occ = append(s.occ, occurrence{kind: kind, name: name, start: start + i, end: start + i + len(name), def: def, attr: attr})
	}
	named := func(kind string, n *spec.Named) { add(kind, n.Name, n.NameRange, true, "") }
	for i := range p.Pools {
		named(namePool, &p.Pools[i].Named)
	}
	for i := range p.Errors {
		named(nameClass, &p.Errors[i].Named)
	}
	for i := range p.Retries {
		r := &p.Retries[i]
		named(namePolicy, &r.Named)
		for _, on := range r.On {
			add(nameClass, on.Name, on.Range, false, "on")
		}
	}
	for i := range p.Tasks {
		t := &p.Tasks[i]
		named(nameTask, &t.Named)
		for _, o := range t.Outputs {
			add(nameArtifact, o.Name, o.Range, true, "outputs")
		}
		for _, in := range t.Inputs {
			add(nameArtifact, in.Artifact, in.Range, false, "inputs")
		}
		for _, d := range t.DependsOn {
			add(nameTask, d.Name, d.Range, false, "depends_on")
		}
		if t.Retry != nil {
			add(namePolicy, t.Retry.Name, t.Retry.Range, false, "retry")
		}
		if t.Pool != nil {
			add(namePool, t.Pool.Name, t.Pool.Range, false, "pool")
		}
	}
	for i := range p.Checks {
		c := &p.Checks[i]
		named(nameCheck, &c.Named)
		add(nameArtifact, c.Input.Name, c.Input.Range, false, "input")
	}
	for i := range p.Sinks {
		named(nameSink, &p.Sinks[i].Named)
	}
	for i := range p.Publishes {
		pub := &p.Publishes[i]
		named(namePublish, &pub.Named)
		add(nameArtifact, pub.Artifact.Name, pub.Artifact.Range, false, "artifact")
		add(nameSink, pub.Sink.Name, pub.Sink.Range, false, "sink")
	}
	slices.SortFunc(s.occ, func(a, b occurrence) int { return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.end, b.end)) })
	s.occ = slices.CompactFunc(s.occ, func(a, b occurrence) bool { return a.start == b.start && a.end == b.end })
	return s
}

// at returns the occurrence under a byte offset; the offset just after a name
// counts, as editors put the cursor there after typing it.
func (s *symbols) at(off int) *occurrence {
	i, _ := slices.BinarySearchFunc(s.occ, off, func(o occurrence, off int) int {
		if o.end < off {
			return -1
		}
		return 1
	})
	if i < len(s.occ) && s.occ[i].start <= off && off <= s.occ[i].end {
		return &s.occ[i]
	}
	return nil
}

// all returns the occurrences of one name, definitions first, in file order.
func (s *symbols) all(kind, name string, withDefs bool) []occurrence {
	var defs, refs []occurrence
	for _, o := range s.occ {
		if o.kind != kind || o.name != name {
			continue
		}
		if o.def {
			defs = append(defs, o)
		} else {
			refs = append(refs, o)
		}
	}
	if !withDefs {
		return refs
	}
	return append(defs, refs...)
}

// defs returns the definitions of a name.
func (s *symbols) defs(kind, name string) []occurrence {
	var out []occurrence
	for _, o := range s.occ {
		if o.def && o.kind == kind && o.name == name {
			out = append(out, o)
		}
	}
	return out
}

// names returns the defined names of a kind, sorted and unique; error classes
// include the built-in ones.
func (s *symbols) names(kind string) []string {
	var out []string
	for _, o := range s.occ {
		if o.def && o.kind == kind {
			out = append(out, o.name)
		}
	}
	if kind == nameClass {
		out = append(out, compiler.BuiltinClasses()...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
