package layout

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// drawnCrossings counts crossing pairs of the drawn segments geometrically,
// independently of the layout's own count.
func drawnCrossings(g Graph) int {
	type seg struct{ a, b Point }
	var segs []seg
	for _, e := range g.Edges {
		for i := 0; i+1 < len(e.Points); i++ {
			if e.Points[i].X != e.Points[i+1].X {
				segs = append(segs, seg{e.Points[i], e.Points[i+1]})
			}
		}
	}
	n := 0
	for i := range segs {
		for j := i + 1; j < len(segs); j++ {
			s, t := segs[i], segs[j]
			if s.a.X != t.a.X || s.b.X != t.b.X {
				continue // not between the same pair of columns
			}
			if (s.a.Y-t.a.Y)*(s.b.Y-t.b.Y) < 0 {
				n++
			}
		}
	}
	return n
}

func TestLayoutSimpleDAGsCrossNoMoreThanNeeded(t *testing.T) {
	cases := []struct {
		name  string
		nodes []string
		needs map[string][]string
		min   int // the fewest crossings any drawing of these layers has
	}{
		{"chain", []string{"a", "b", "c"}, map[string][]string{"b": {"a"}, "c": {"b"}}, 0},
		{"diamond", []string{"a", "b", "c", "d"}, map[string][]string{"b": {"a"}, "c": {"a"}, "d": {"b", "c"}}, 0},
		// Given in an order that crosses: x1->y2, x2->y1 listed so that the
		// first placement has them swapped.
		{"swapped pairs", []string{"x1", "x2", "y1", "y2"}, map[string][]string{"y2": {"x1"}, "y1": {"x2"}}, 0},
		{"two chains interleaved", []string{"a1", "b1", "b2", "a2", "a3", "b3"},
			map[string][]string{"a2": {"a1"}, "a3": {"a2"}, "b2": {"b1"}, "b3": {"b2"}}, 0},
		{"K2,2", []string{"a", "b", "c", "d"}, map[string][]string{"c": {"a", "b"}, "d": {"a", "b"}}, 1},
		{"long edge around", []string{"s", "m1", "m2", "e", "x"}, map[string][]string{"m1": {"s"}, "m2": {"m1"}, "e": {"m2", "s"}, "x": {"s"}}, 0},
		{"fan out and in", []string{"src", "t3", "t1", "t2", "sink"},
			map[string][]string{"t1": {"src"}, "t2": {"src"}, "t3": {"src"}, "sink": {"t1", "t2", "t3"}}, 0},
		{"crossed ladder", []string{"a", "b", "c", "d", "e", "f"},
			map[string][]string{"f": {"a"}, "e": {"b"}, "d": {"c"}}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := Layout(c.nodes, c.needs)
			if g.Crossings != c.min {
				t.Errorf("crossings = %d, want %d; nodes %+v", g.Crossings, c.min, g.Nodes)
			}
			if d := drawnCrossings(g); d != g.Crossings {
				t.Errorf("drawn crossings %d, counted %d", d, g.Crossings)
			}
		})
	}
}

func TestLayoutLayersFollowEdges(t *testing.T) {
	nodes, needs := randomDAG(rand.New(rand.NewPCG(1, 2)), 300, 3)
	g := Layout(nodes, needs)
	at := map[string]Node{}
	for _, n := range g.Nodes {
		at[n.Name] = n
	}
	for to, from := range needs {
		for _, f := range from {
			if at[f].Layer >= at[to].Layer || at[f].X >= at[to].X {
				t.Fatalf("%s (layer %d) needs %s (layer %d): not drawn left of it", to, at[to].Layer, f, at[f].Layer)
			}
		}
	}
	// No two nodes overlap.
	seen := map[Point]string{}
	for _, n := range g.Nodes {
		p := Point{n.X, n.Y}
		if o, ok := seen[p]; ok {
			t.Fatalf("%s and %s both at %v", n.Name, o, p)
		}
		seen[p] = n.Name
		if n.X+NodeW > g.W || n.Y+NodeH > g.H {
			t.Fatalf("%s at %v outside %dx%d", n.Name, p, g.W, g.H)
		}
	}
	if d := drawnCrossings(g); d != g.Crossings {
		t.Errorf("drawn crossings %d, counted %d", d, g.Crossings)
	}
}

// An edge that closes a cycle (a plan has none) is dropped, not looped on.
func TestLayoutSurvivesCycles(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20; i++ {
		nodes, needs := randomDAG(r, 40, 2)
		needs[nodes[0]] = append(needs[nodes[0]], nodes[len(nodes)-1])
		g := Layout(nodes, needs)
		if len(g.Nodes) != len(nodes) || len(g.Edges) == 0 {
			t.Fatalf("%d nodes, %d edges placed", len(g.Nodes), len(g.Edges))
		}
	}
}

func randomDAG(r *rand.Rand, n, fanIn int) ([]string, map[string][]string) {
	nodes := make([]string, n)
	needs := map[string][]string{}
	for i := range nodes {
		nodes[i] = fmt.Sprintf("t%04d", i)
		if i == 0 {
			continue
		}
		for k := 0; k < 1+r.IntN(fanIn); k++ {
			j := max(0, i-1-r.IntN(min(i, 30)))
			needs[nodes[i]] = append(needs[nodes[i]], nodes[j])
		}
	}
	return nodes, needs
}

func BenchmarkLayout1000(b *testing.B) {
	nodes, needs := randomDAG(rand.New(rand.NewPCG(5, 6)), 1000, 3)
	for b.Loop() {
		Layout(nodes, needs)
	}
}
