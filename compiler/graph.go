package compiler

import (
	"cmp"
	"slices"

	"github.com/dominikbraun/graph"
)

// Graph is the pipeline's DAG with the facts every later stage needs, computed
// once, in time linear in nodes plus edges.
//
// dominikbraun/graph is the graph type pipec hands to tools (Library), but the
// compiler does not build it on its hot path: measured at 100,000 tasks its
// memory store and AdjacencyMap cost about 1.1 s and 700 MB of a 2.3 s, 980 MB
// compile, its TopologicalSort is quadratic and PreventCycles searches per
// edge. Order and components are computed here (Kahn, Tarjan) over sorted
// adjacency lists built straight from the edge list.
type Graph struct {
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

// nodeIndex is the node ids, sorted, and the position of each.
type nodeIndex struct {
	sorted []string
	pos    map[string]int32
}

// indexNodes sorts the node ids. It needs only what index found, so compile
// runs it beside link.
func indexNodes(nodes []string) nodeIndex {
	ix := nodeIndex{sorted: slices.Sorted(slices.Values(nodes)), pos: make(map[string]int32, len(nodes))}
	for i, id := range ix.sorted {
		ix.pos[id] = int32(i)
	}
	return ix
}

// newGraph builds the graph from the node ids and the edges as written. It
// returns the edges' keys sorted by (from, to) with duplicates dropped (the
// first writing of an edge is kept, so its range points where the author
// first made it). All the work is on int32 node indices: sorting 300,000 edges
// as structs of strings was a third of a 100k-task compile.
func newGraph(nodes nodeIndex, written []edge) (*Graph, []edgeKey) {
	gr := &Graph{Nodes: nodes.sorted}
	n := len(gr.Nodes)
	keys := make([]edgeKey, len(written))
	for i, e := range written {
		keys[i] = edgeKey{nodes.pos[e.from], nodes.pos[e.to], int32(i)}
	}
	// Sort by (from, to, seq). Packed into one uint64 when the indices fit
	// (2^21 nodes, 2^22 edges), the sort compares integers instead of
	// calling a comparison: a sixth of a 10k-task compile before.
	if n < 1<<21 && len(keys) < 1<<22 {
		packed := make([]uint64, len(keys))
		for i, k := range keys {
			packed[i] = uint64(k.from)<<43 | uint64(k.to)<<22 | uint64(k.seq)
		}
		slices.Sort(packed)
		for i, p := range packed {
			keys[i] = edgeKey{int32(p >> 43), int32(p >> 22 & (1<<21 - 1)), int32(p & (1<<22 - 1))}
		}
	} else {
		slices.SortFunc(keys, func(a, b edgeKey) int {
			return cmp.Or(cmpEdge(a, b), cmp.Compare(a.seq, b.seq))
		})
	}
	keys = slices.CompactFunc(keys, func(a, b edgeKey) bool { return cmpEdge(a, b) == 0 })
	// Compressed adjacency: succ of node i is succTo[succAt[i]:succAt[i+1]].
	succAt := make([]int32, n+1)
	succTo := make([]int32, len(keys))
	predCount := make([]int32, n)
	for i, k := range keys {
		succAt[k.from+1]++
		succTo[i] = k.to
		predCount[k.to]++
	}
	for i := range n {
		succAt[i+1] += succAt[i]
	}
	adj := indexAdjacency{at: succAt, to: succTo}
	// The maps by id on another goroutine, while the order and the cyclic
	// components are found on indices; only a cycle's shortest path (rare)
	// reads the maps.
	maps := inBackground(func() idMaps { return newIDMaps(gr.Nodes, keys, adj, predCount) })
	comps := gr.cyclicComponents(adj)
	gr.Order = gr.topoOrder(adj, predCount)
	m := maps()
	gr.Succ, gr.Pred = m.succ, m.pred
	gr.Cycles = gr.shortestCycles(comps)
	return gr, keys
}

// idMaps are a graph's adjacency lists by node id.
type idMaps struct {
	succ, pred map[string][]string
}

// newIDMaps builds the adjacency lists by id from the sorted, deduplicated
// edge keys. Every list is a window of one backing array per direction
// (capped, so an append by a reader copies rather than overwrites its
// neighbour): two allocations instead of one per node, which at 10,000 tasks
// was most of building the graph.
func newIDMaps(nodes []string, keys []edgeKey, adj indexAdjacency, predCount []int32) idMaps {
	n := len(nodes)
	m := idMaps{succ: make(map[string][]string, n), pred: make(map[string][]string, n)}
	succAll := make([]string, len(keys))
	for i, t := range adj.to {
		succAll[i] = nodes[t]
	}
	for i := range n {
		if a, b := adj.at[i], adj.at[i+1]; a < b {
			m.succ[nodes[i]] = succAll[a:b:b]
		}
	}
	predAt := make([]int32, n+1)
	for i := range n {
		predAt[i+1] = predAt[i] + predCount[i]
	}
	predAll := make([]string, len(keys))
	fill := slices.Clone(predAt[:n])
	// Keys are sorted by source, so each node's predecessors arrive sorted.
	for _, k := range keys {
		predAll[fill[k.to]] = nodes[k.from]
		fill[k.to]++
	}
	for i := range n {
		if a, b := predAt[i], predAt[i+1]; a < b {
			m.pred[nodes[i]] = predAll[a:b:b]
		}
	}
	return m
}

// edgeKey is an edge by the indices of its nodes in the sorted node list,
// and seq, its index among the edges as written.
type edgeKey struct{ from, to, seq int32 }

// cmpEdge orders edge keys by (from, to).
func cmpEdge(a, b edgeKey) int {
	return cmp.Or(cmp.Compare(a.from, b.from), cmp.Compare(a.to, b.to))
}

// indexAdjacency is compressed sparse rows over node indices.
type indexAdjacency struct {
	at, to []int32
}

func (a indexAdjacency) succ(i int32) []int32 { return a.to[a.at[i]:a.at[i+1]] }

// Library returns the graph as a dominikbraun/graph value, for tools that
// want that library's algorithms (paths, traversals). It is built on demand.
func (g *Graph) Library() (graph.Graph[string, string], error) {
	lg := graph.New(graph.StringHash, graph.Directed())
	for _, n := range g.Nodes {
		if err := lg.AddVertex(n); err != nil {
			return nil, err
		}
	}
	for _, n := range g.Nodes {
		for _, s := range g.Succ[n] {
			if err := lg.AddEdge(n, s); err != nil {
				return nil, err
			}
		}
	}
	return lg, nil
}

// topoOrder is Kahn's algorithm with a min-heap of node indices, so
// equal-rank nodes come out in id order and the result is deterministic.
// Nodes on or behind a cycle are left out.
func (g *Graph) topoOrder(adj indexAdjacency, predCount []int32) []string {
	indeg := slices.Clone(predCount)
	var h indexHeap
	for i, d := range indeg {
		if d == 0 {
			h.push(int32(i))
		}
	}
	order := make([]string, 0, len(g.Nodes))
	for len(h) > 0 {
		n := h.pop()
		order = append(order, g.Nodes[n])
		for _, s := range adj.succ(n) {
			if indeg[s]--; indeg[s] == 0 {
				h.push(s)
			}
		}
	}
	return order
}

// cyclicComponents runs Tarjan's algorithm (iteratively, so 100k-node chains
// do not exhaust the stack) and returns the strongly connected components
// that hold a cycle.
func (g *Graph) cyclicComponents(adj indexAdjacency) [][]string {
	n := len(g.Nodes)
	const unseen = -1
	index := make([]int32, n)
	low := make([]int32, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = unseen
	}
	var stack []int32
	var sccs [][]string
	next := int32(0)
	type frame struct {
		node int32
		edge int
	}
	var call []frame
	for root := range int32(n) {
		if index[root] != unseen {
			continue
		}
		call = append(call[:0], frame{node: root})
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			if succ := adj.succ(f.node); f.edge < len(succ) {
				w := succ[f.edge]
				f.edge++
				if index[w] == unseen {
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
			if low[v] != index[v] {
				continue
			}
			var comp []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, g.Nodes[w])
				if w == v {
					break
				}
			}
			if len(comp) > 1 || slices.Contains(adj.succ(v), v) {
				sccs = append(sccs, comp)
			}
		}
	}
	return sccs
}

// shortestCycles returns one shortest cycle through the smallest node of each
// cyclic component, sorted. It reads Succ.
func (g *Graph) shortestCycles(comps [][]string) [][]string {
	cycles := make([][]string, 0, len(comps))
	for _, comp := range comps {
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

// indexHeap is a binary min-heap of node indices; indices follow id order.
// It is written out rather than run by container/heap, whose Push and Pop
// take and return any: every index above 255 was boxed, an allocation each.
type indexHeap []int32

func (h *indexHeap) push(x int32) {
	*h = append(*h, x)
	a := *h
	for i := len(a) - 1; i > 0; {
		parent := (i - 1) / 2
		if a[parent] <= a[i] {
			break
		}
		a[parent], a[i] = a[i], a[parent]
		i = parent
	}
}

// pop removes and returns the smallest index.
func (h *indexHeap) pop() int32 {
	a := *h
	top, last := a[0], len(a)-1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		least := i
		if l := 2*i + 1; l < len(a) && a[l] < a[least] {
			least = l
		}
		if r := 2*i + 2; r < len(a) && a[r] < a[least] {
			least = r
		}
		if least == i {
			break
		}
		a[i], a[least] = a[least], a[i]
		i = least
	}
	*h = a
	return top
}
