package compiler

import (
	"fmt"
	"io"
	"strings"
)

// WriteDOT writes the graph as Graphviz DOT. The library's draw.DOT iterates
// maps, so its output changes between runs; this writer walks the sorted
// nodes and adjacency lists and gives the same bytes every time.
func WriteDOT(w io.Writer, g *Graph) error {
	var b strings.Builder
	b.WriteString("digraph pipeline {\n\trankdir=LR;\n")
	for _, n := range g.Nodes {
		kind, name, _ := strings.Cut(n, ".")
		shape := map[string]string{KindTask: "box", KindCheck: "diamond", KindPublish: "cylinder"}[kind]
		fmt.Fprintf(&b, "\t%q [label=%q, shape=%s];\n", n, name, shape)
	}
	for _, n := range g.Nodes {
		for _, s := range g.Succ[n] {
			fmt.Fprintf(&b, "\t%q -> %q;\n", n, s)
		}
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMermaid writes the graph as a Mermaid flowchart. Mermaid ids allow
// letters, digits and '_', so ids are numbered and names go in labels.
func WriteMermaid(w io.Writer, g *Graph) error {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	ids := make(map[string]string, len(g.Nodes))
	for i, n := range g.Nodes {
		ids[n] = fmt.Sprintf("n%d", i)
		kind, name, _ := strings.Cut(n, ".")
		open, close := "[", "]"
		switch kind {
		case KindCheck:
			open, close = "{", "}"
		case KindPublish:
			open, close = "[(", ")]"
		}
		fmt.Fprintf(&b, "    %s%s\"%s %s\"%s\n", ids[n], open, kind, name, close)
	}
	for _, n := range g.Nodes {
		for _, s := range g.Succ[n] {
			fmt.Fprintf(&b, "    %s --> %s\n", ids[n], ids[s])
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
