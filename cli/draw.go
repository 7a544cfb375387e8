package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/report"
)

// A picture is the plan as a reader wants to see it: tasks, checks, publishes
// and sinks as nodes; data edges labelled with the artifact that flows; an
// input of another interval ("raw@-1") dashed; a depends_on edge (order
// without data) dotted with a hollow arrow. It is built from the plan, whose
// lists are sorted, so the output is the same bytes every time.
type picture struct {
	name  string
	nodes []picNode
	edges []picEdge
}

type picNode struct {
	id, kind, label string
}

type edgeKind int

const (
	edgeData     edgeKind = iota // an artifact of the same interval
	edgeInterval                 // an artifact of another interval
	edgeDepends                  // depends_on: order, no data
	edgeAccept                   // a check's verdict gating a publish
	edgeWrite                    // a publish writing into its sink
)

type picEdge struct {
	from, to string
	kind     edgeKind
	label    string
}

const kindSink = "sink"

func newPicture(p *compiler.Plan) *picture {
	pic := &picture{name: p.Pipeline}
	for _, t := range p.Tasks {
		pic.nodes = append(pic.nodes, picNode{compiler.NodeID(compiler.KindTask, t.Name), compiler.KindTask, t.Name})
	}
	for _, c := range p.Checks {
		pic.nodes = append(pic.nodes, picNode{compiler.NodeID(compiler.KindCheck, c.Name), compiler.KindCheck, c.Name})
	}
	for _, pb := range p.Publishes {
		pic.nodes = append(pic.nodes, picNode{compiler.NodeID(compiler.KindPublish, pb.Name), compiler.KindPublish, pb.Name})
	}
	for _, s := range p.Sinks {
		label := s.Name + "\n" + s.Type
		if s.Fencing == "token" {
			label += ", fenced"
		} else {
			label += ", not fenced"
		}
		pic.nodes = append(pic.nodes, picNode{compiler.NodeID(kindSink, s.Name), kindSink, label})
	}
	producer := map[string]string{}
	for _, a := range p.Artifacts {
		if a.Producer != "" {
			producer[a.Name] = compiler.NodeID(compiler.KindTask, a.Producer)
		}
	}
	for _, t := range p.Tasks {
		id := compiler.NodeID(compiler.KindTask, t.Name)
		for _, in := range t.Inputs {
			if in.Producer == "" {
				continue // a missing artifact: lint says so; nothing to draw from
			}
			e := picEdge{from: compiler.NodeID(compiler.KindTask, in.Producer), to: id, kind: edgeData, label: in.Artifact}
			if in.Offset != 0 {
				e.kind = edgeInterval
				e.label = fmt.Sprintf("%s@%+d", in.Artifact, in.Offset)
			}
			pic.edges = append(pic.edges, e)
		}
		for _, d := range t.DependsOn {
			pic.edges = append(pic.edges, picEdge{from: compiler.NodeID(compiler.KindTask, d), to: id, kind: edgeDepends, label: "depends_on"})
		}
	}
	for _, c := range p.Checks {
		if from, ok := producer[c.Input]; ok {
			pic.edges = append(pic.edges, picEdge{from: from, to: compiler.NodeID(compiler.KindCheck, c.Name), kind: edgeData, label: c.Input})
		}
	}
	for _, pb := range p.Publishes {
		id := compiler.NodeID(compiler.KindPublish, pb.Name)
		if from, ok := producer[pb.Artifact]; ok {
			pic.edges = append(pic.edges, picEdge{from: from, to: id, kind: edgeData, label: pb.Artifact})
		}
		for _, c := range pb.Checks {
			pic.edges = append(pic.edges, picEdge{from: compiler.NodeID(compiler.KindCheck, c), to: id, kind: edgeAccept, label: "accepted"})
		}
		if pb.Sink != "" {
			pic.edges = append(pic.edges, picEdge{from: id, to: compiler.NodeID(kindSink, pb.Sink), kind: edgeWrite})
		}
	}
	known := map[string]bool{}
	for _, n := range pic.nodes {
		known[n.id] = true
	}
	// An edge to a name the spec does not define (lint reports it) is left out.
	pic.edges = slices.DeleteFunc(pic.edges, func(e picEdge) bool { return !known[e.from] || !known[e.to] })
	return pic
}

// dotQuote writes s as a DOT string: escaped for a terminal first, then with
// quotes, backslashes and newlines as DOT reads them.
func dotQuote(s string) string {
	s = report.Escape(s)
	s = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
	return `"` + s + `"`
}

// writeDOT writes the picture as Graphviz DOT (render with `dot -Tpng`).
func (pic *picture) writeDOT(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n", dotQuote(pic.name))
	b.WriteString("\trankdir=LR;\n\tnode [fontname=\"Helvetica\", fontsize=11];\n\tedge [fontname=\"Helvetica\", fontsize=9];\n")
	shapes := map[string]string{compiler.KindTask: "box", compiler.KindCheck: "diamond", compiler.KindPublish: "cds", kindSink: "cylinder"}
	for _, n := range pic.nodes {
		extra := ""
		if n.kind == compiler.KindTask {
			extra = ", style=rounded"
		}
		fmt.Fprintf(&b, "\t%s [label=%s, shape=%s%s];\n", dotQuote(n.id), dotQuote(n.label), shapes[n.kind], extra)
	}
	for _, e := range pic.edges {
		var attrs []string
		if e.label != "" {
			attrs = append(attrs, "label="+dotQuote(e.label))
		}
		switch e.kind {
		case edgeInterval:
			attrs = append(attrs, "style=dashed")
		case edgeDepends:
			attrs = append(attrs, "style=dotted", "arrowhead=empty", `color="gray40"`, `fontcolor="gray40"`)
		case edgeAccept:
			attrs = append(attrs, `color="darkgreen"`, `fontcolor="darkgreen"`)
		case edgeWrite:
			attrs = append(attrs, "penwidth=2")
		}
		fmt.Fprintf(&b, "\t%s -> %s [%s];\n", dotQuote(e.from), dotQuote(e.to), strings.Join(attrs, ", "))
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// mermaidText makes s safe inside a quoted Mermaid label.
func mermaidText(s string) string {
	s = report.Escape(s)
	return strings.NewReplacer(`"`, "#quot;", "\n", "<br/>").Replace(s)
}

// writeMermaid writes the picture as a Mermaid flowchart: data edges solid
// with the artifact, other intervals dotted (-.->), depends_on thick (==>).
func (pic *picture) writeMermaid(w io.Writer) error {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	ids := make(map[string]string, len(pic.nodes))
	for i, n := range pic.nodes {
		ids[n.id] = fmt.Sprintf("n%d", i)
		open, close := "(", ")"
		switch n.kind {
		case compiler.KindCheck:
			open, close = "{", "}"
		case compiler.KindPublish:
			open, close = "[/", "/]"
		case kindSink:
			open, close = "[(", ")]"
		}
		fmt.Fprintf(&b, "    %s%s\"%s %s\"%s\n", ids[n.id], open, n.kind, mermaidText(n.label), close)
	}
	for _, e := range pic.edges {
		arrow := "-->"
		switch e.kind {
		case edgeInterval:
			arrow = "-.->"
		case edgeDepends:
			arrow = "==>"
		}
		if e.label != "" {
			fmt.Fprintf(&b, "    %s %s|\"%s\"| %s\n", ids[e.from], arrow, mermaidText(e.label), ids[e.to])
		} else {
			fmt.Fprintf(&b, "    %s %s %s\n", ids[e.from], arrow, ids[e.to])
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
