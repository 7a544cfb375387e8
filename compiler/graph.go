package compiler

import (
	"cmp"
	"container/heap"
	"slices"

	"github.com/dominikbraun/graph"
)

// Graph is the pipeline's DAG with the facts every later stage needs, computed
// once. The structure lives in a dominikbraun/graph; order and components are
// computed here with linear algorithms (Kahn, Tarjan), because the library's
// TopologicalSort is quadratic and its cycle prevention searches per edge.
type Graph struct {
	// G is the library graph (vertices are node ids, see NodeID).
	G graph.Graph[string, string]
	// Nodes holds every node id, sorted.
	Nodes []string
	// Succ and Pred hold sorted adjacency lists by node id.
	Succ, Pred map[string][]string
	// Order is a topological order (ties by id) of the nodes outside cycles.
	Order []string
	// Cycles holds one cycle per strongly connected component with a cycle,
	// each starting at its smallest node, sorted.
	Cycles [][]string
}

// newGraph builds the library graph and derives sorted adjacency lists.
func newGraph(nodes []string, edges [][2]string) (*Graph, error) {
	g := graph.New(graph.StringHash, graph.Directed())
	for _, n := range nodes {
		if err := g.AddVertex(n); err != nil {
			return nil, err
		}
	}
	for _, e := range edges {
		if err := g.AddEdge(e[0], e[1]); err != nil && err != graph.ErrEdgeAlreadyExists {
			return nil, err
		}
	}
	adj, err := g.AdjacencyMap()
	if err != nil {
		return nil, err
	}
	gr := &Graph{G: g, Nodes: slices.Sorted(func(yield func(string) bool) {
		for n := range adj {
			if !yield(n) {
				return
			}
		}
	}), Succ: make(map[string][]string, len(adj)), Pred: make(map[string][]string, len(adj))}
	for from, tos := range adj {
		for to := range tos {
			gr.Succ[from] = append(gr.Succ[from], to)
			gr.Pred[to] = append(gr.Pred[to], from)
		}
	}
	for _, m := range []map[string][]string{gr.Succ, gr.Pred} {
		for k := range m {
			slices.Sort(m[k])
		}
	}
	gr.Cycles = gr.findCycles()
	gr.Order = gr.topoOrder()
	return gr, nil
}

// topoOrder is Kahn's algorithm with a min-heap, so equal-rank nodes come out in
// id order and the result is deterministic. Nodes on or behind a cycle are left out.
func (g *Graph) topoOrder() []string {
	indeg := make(map[string]int, len(g.Nodes))
	for _, n := range g.Nodes {
		indeg[n] = len(g.Pred[n])
	}
	h := &stringHeap{}
	for _, n := range g.Nodes {
		if indeg[n] == 0 {
			*h = append(*h, n)
		}
	}
	heap.Init(h)
	order := make([]string, 0, len(g.Nodes))
	for h.Len() > 0 {
		n := heap.Pop(h).(string)
		order = append(order, n)
		for _, s := range g.Succ[n] {
			if indeg[s]--; indeg[s] == 0 {
				heap.Push(h, s)
			}
		}
	}
	return order
}

// findCycles runs Tarjan's algorithm (iteratively, so 100k-node chains do not
// exhaust the stack) and returns one shortest cycle through the smallest node
// of each cyclic component.
func (g *Graph) findCycles() [][]string {
	index := make(map[string]int, len(g.Nodes))
	low := make(map[string]int, len(g.Nodes))
	onStack := make(map[string]bool)
	var stack []string
	var sccs [][]string
	next := 0
	type frame struct {
		node string
		edge int
	}
	for _, root := range g.Nodes {
		if _, seen := index[root]; seen {
			continue
		}
		call := []frame{{node: root}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			succ := g.Succ[f.node]
			if f.edge < len(succ) {
				w := succ[f.edge]
				f.edge++
				if _, seen := index[w]; !seen {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{node: w})
				} else if onStack[w] {
					low[f.node] = min(low[f.node], index[w])
				}
				continue
			}
			v := f.node
			call = call[:len(call)-1]
			if len(call) > 0 {
				p := call[len(call)-1].node
				low[p] = min(low[p], low[v])
			}
			if low[v] == index[v] {
				var comp []string
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp = append(comp, w)
					if w == v {
						break
					}
				}
				if len(comp) > 1 || slices.Contains(g.Succ[v], v) {
					sccs = append(sccs, comp)
				}
			}
		}
	}
	cycles := make([][]string, 0, len(sccs))
	for _, comp := range sccs {
		cycles = append(cycles, g.shortestCycle(comp))
	}
	slices.SortFunc(cycles, func(a, b []string) int { return slices.Compare(a, b) })
	return cycles
}

// shortestCycle finds, by breadth-first search inside one component, the
// shortest cycle through the component's smallest node. The returned path
// starts and ends at that node.
func (g *Graph) shortestCycle(comp []string) []string {
	in := make(map[string]bool, len(comp))
	for _, n := range comp {
		in[n] = true
	}
	start := slices.Min(comp)
	parent := map[string]string{}
	queue := []string{start}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, s := range g.Succ[n] {
			if !in[s] {
				continue
			}
			if s == start {
				path := []string{start}
				for c := n; c != start; c = parent[c] {
					path = append(path, c)
				}
				slices.Reverse(path[1:])
				return append(path, start)
			}
			if _, seen := parent[s]; !seen {
				parent[s] = n
				queue = append(queue, s)
			}
		}
	}
	return []string{start, start}
}

type stringHeap []string

func (h stringHeap) Len() int           { return len(h) }
func (h stringHeap) Less(i, j int) bool { return cmp.Less(h[i], h[j]) }
func (h stringHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *stringHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *stringHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
