package spec

// kindAt returns the element kind whose fields the last label of path is one
// of: the path of a field in a CUE spec, from "pipeline" down
// (pipeline.NAME.task.NAME.heartbeat.every is a heartbeat field).
func kindAt(path []string) string {
	if len(path) < 3 || path[0] != KindPipeline {
		return ""
	}
	kind := KindPipeline
	fields := Fields()
	rest := path[2 : len(path)-1]
	for len(rest) > 0 {
		var next *Field
		for i, f := range fields[kind] {
			if f.Name == rest[0] && f.Nested != "" {
				next = &fields[kind][i]
			}
		}
		if next == nil {
			return ""
		}
		kind = next.Nested
		rest = rest[1:]
		if next.Labelled {
			if len(rest) == 0 {
				return ""
			}
			rest = rest[1:]
		}
	}
	return kind
}

// suggestField returns the accepted field closest to the unknown last label
// of path, when one is close enough to be a likely typo.
func suggestField(path []string) string {
	kind := kindAt(path)
	if kind == "" {
		return ""
	}
	bad := path[len(path)-1]
	best, bestDist := "", 3
	for _, f := range Fields()[kind] {
		if d := editDistance(bad, f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
