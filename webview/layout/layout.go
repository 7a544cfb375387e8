// Package layout places a DAG for drawing: layered (Sugiyama-style), left to
// right. Each node goes in the layer after its deepest predecessor; an edge
// that spans several layers gets a dummy point in each layer it crosses, so
// edges bend around nodes instead of through them. The order within each
// layer is chosen by barycenter sweeps (down, then up, a few rounds), and the
// order with the fewest edge crossings seen is kept. Everything is computed
// here, in Go: no external program is needed.
package layout

import (
	"cmp"
	"slices"
)

// Geometry of a drawing, in SVG user units.
const (
	NodeW  = 168 // node box width
	NodeH  = 30  // node box height
	ColGap = 64  // horizontal gap between layers
	RowGap = 14  // vertical gap between nodes of a layer
	Margin = 8
)

// Node is a placed node: its box's top-left corner.
type Node struct {
	Name  string
	Layer int
	Pos   int // index in its layer, top to bottom
	X, Y  int
}

// Point is a point of an edge's polyline.
type Point struct{ X, Y int }

// Edge is a placed edge from From to To: Points runs from the right side of
// From's box, through the dummy points, to the left side of To's box.
type Edge struct {
	From, To string
	Points   []Point
}

// Graph is a placed DAG.
type Graph struct {
	Nodes []Node // in the order given to Layout
	Edges []Edge
	W, H  int
	// Crossings is how many pairs of edge segments cross between adjacent
	// layers in the chosen order.
	Crossings int
}

// Sweeps bounds the barycenter rounds (one round is a down and an up sweep).
const Sweeps = 8

// vertex is a node or a dummy point in the layered graph.
type vertex struct {
	layer int
	pos   int
	up    []int // vertices in the layer before, linked to this one
	down  []int // vertices in the layer after
	real  int   // index of the node, -1 for a dummy
}

// Layout places nodes; needs maps a node to the nodes it depends on (drawn
// left of it). Names in needs that are not nodes are ignored, and so are
// edges that would close a cycle (a valid plan has none).
func Layout(nodes []string, needs map[string][]string) Graph {
	index := make(map[string]int, len(nodes))
	for i, n := range nodes {
		index[n] = i
	}
	// Layers: longest path from a source, computed in topological order.
	layer := make([]int, len(nodes))
	state := make([]byte, len(nodes)) // 0 new, 1 visiting, 2 done
	var preds [][]int = make([][]int, len(nodes))
	for i, n := range nodes {
		seen := map[int]bool{}
		for _, p := range needs[n] {
			if j, ok := index[p]; ok && j != i && !seen[j] {
				seen[j] = true
				preds[i] = append(preds[i], j)
			}
		}
	}
	var visit func(i int) int
	visit = func(i int) int {
		switch state[i] {
		case 1:
			return -1 // a cycle: this edge is dropped
		case 2:
			return layer[i]
		}
		state[i] = 1
		l := 0
		kept := preds[i][:0:0]
		for _, p := range preds[i] {
			pl := visit(p)
			if pl < 0 {
				continue
			}
			kept = append(kept, p)
			l = max(l, pl+1)
		}
		preds[i] = kept
		layer[i] = l
		state[i] = 2
		return l
	}
	// Iterative deepening would avoid recursion; plans are at most a few
	// thousand tasks deep, which Go's growable stacks handle.
	nlayers := 0
	for i := range nodes {
		nlayers = max(nlayers, visit(i)+1)
	}

	// Vertices: nodes first, then dummies.
	vs := make([]vertex, len(nodes), len(nodes)*2)
	for i := range nodes {
		vs[i] = vertex{layer: layer[i], real: i}
	}
	type chain struct {
		from, to int
		via      []int
	}
	var chains []chain
	for i := range nodes {
		for _, p := range preds[i] {
			c := chain{from: p, to: i}
			prev := p
			for l := layer[p] + 1; l < layer[i]; l++ {
				vs = append(vs, vertex{layer: l, real: -1})
				d := len(vs) - 1
				c.via = append(c.via, d)
				vs[prev].down = append(vs[prev].down, d)
				vs[d].up = append(vs[d].up, prev)
				prev = d
			}
			vs[prev].down = append(vs[prev].down, i)
			vs[i].up = append(vs[i].up, prev)
			chains = append(chains, c)
		}
	}
	layers := make([][]int, nlayers)
	for v := range vs {
		layers[vs[v].layer] = append(layers[vs[v].layer], v)
	}
	for _, ls := range layers {
		for p, v := range ls {
			vs[v].pos = p
		}
	}

	best := snapshot(layers)
	bestC := crossings(vs, layers)
	for round := 0; round < Sweeps && bestC > 0; round++ {
		for l := 1; l < nlayers; l++ {
			order(vs, layers[l], func(v int) []int { return vs[v].up })
		}
		for l := nlayers - 2; l >= 0; l-- {
			order(vs, layers[l], func(v int) []int { return vs[v].down })
		}
		c := crossings(vs, layers)
		if c < bestC {
			bestC, best = c, snapshot(layers)
		} else if c >= bestC && round > 1 {
			break // no progress
		}
	}
	layers = best
	for _, ls := range layers {
		for p, v := range ls {
			vs[v].pos = p
		}
	}

	// Coordinates: columns by layer, rows by position, each layer centred
	// on the tallest.
	tallest := 0
	for _, ls := range layers {
		tallest = max(tallest, len(ls))
	}
	pt := make([]Point, len(vs))
	for l, ls := range layers {
		off := (tallest - len(ls)) * (NodeH + RowGap) / 2
		for p, v := range ls {
			pt[v] = Point{X: Margin + l*(NodeW+ColGap), Y: Margin + off + p*(NodeH+RowGap)}
		}
	}
	g := Graph{Crossings: bestC, W: 2*Margin + max(nlayers, 1)*(NodeW+ColGap) - ColGap,
		H: 2*Margin + max(tallest, 1)*(NodeH+RowGap) - RowGap}
	for i, n := range nodes {
		g.Nodes = append(g.Nodes, Node{Name: n, Layer: layer[i], Pos: vs[i].pos, X: pt[i].X, Y: pt[i].Y})
	}
	for _, c := range chains {
		e := Edge{From: nodes[c.from], To: nodes[c.to]}
		e.Points = append(e.Points, Point{pt[c.from].X + NodeW, pt[c.from].Y + NodeH/2})
		for _, d := range c.via {
			e.Points = append(e.Points, Point{pt[d].X, pt[d].Y + NodeH/2}, Point{pt[d].X + NodeW, pt[d].Y + NodeH/2})
		}
		e.Points = append(e.Points, Point{pt[c.to].X, pt[c.to].Y + NodeH/2})
		g.Edges = append(g.Edges, e)
	}
	slices.SortStableFunc(g.Edges, func(a, b Edge) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
	})
	return g
}

func snapshot(layers [][]int) [][]int {
	out := make([][]int, len(layers))
	for i, ls := range layers {
		out[i] = slices.Clone(ls)
	}
	return out
}

// order sorts a layer by the barycenter of each vertex's neighbours in the
// adjacent layer (a vertex without neighbours keeps its place), then records
// the new positions.
func order(vs []vertex, ls []int, nbrs func(int) []int) {
	bary := make(map[int]float64, len(ls))
	for _, v := range ls {
		ns := nbrs(v)
		if len(ns) == 0 {
			bary[v] = float64(vs[v].pos)
			continue
		}
		sum := 0
		for _, n := range ns {
			sum += vs[n].pos
		}
		bary[v] = float64(sum) / float64(len(ns))
	}
	slices.SortStableFunc(ls, func(a, b int) int {
		return cmp.Or(cmp.Compare(bary[a], bary[b]), cmp.Compare(vs[a].pos, vs[b].pos))
	})
	for p, v := range ls {
		vs[v].pos = p
	}
}

// crossings counts crossing pairs of segments between each pair of adjacent
// layers with the current positions: the inversions of the lower ends when
// the segments are sorted by their upper ends (a Fenwick tree, so the cost is
// E log V per layer pair).
func crossings(vs []vertex, layers [][]int) int {
	total := 0
	for l := 0; l+1 < len(layers); l++ {
		type seg struct{ a, b int }
		var segs []seg
		for _, v := range layers[l] {
			for _, d := range vs[v].down {
				segs = append(segs, seg{vs[v].pos, vs[d].pos})
			}
		}
		slices.SortFunc(segs, func(x, y seg) int { return cmp.Or(cmp.Compare(x.a, y.a), cmp.Compare(x.b, y.b)) })
		n := len(layers[l+1])
		tree := make([]int, n+1)
		seen := 0
		for _, s := range segs {
			// Segments seen so far with a lower end strictly greater than s.b cross it.
			le := 0
			for i := s.b + 1; i > 0; i -= i & -i {
				le += tree[i]
			}
			total += seen - le
			for i := s.b + 1; i <= n; i += i & -i {
				tree[i]++
			}
			seen++
		}
	}
	return total
}
