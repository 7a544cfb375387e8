// Package suggest finds the closest known name to a misspelt one, for
// "did you mean" hints in diagnostics.
package suggest

// Closest returns the candidate nearest to name by edit distance, if it is close
// enough to be a plausible typo (at most a third of the name's length, and at
// least 1 edit allowed). Ties go to the first candidate, so callers pass a
// sorted list for stable output.
func Closest(name string, candidates []string) (string, bool) {
	best, bestDist := "", -1
	limit := max(1, len([]rune(name))/3)
	for _, c := range candidates {
		if c == name {
			continue
		}
		d := distance(name, c)
		if d <= limit && (bestDist < 0 || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best, bestDist >= 0
}

// Hint formats a suggestion as a sentence to append to a message, or "".
func Hint(name string, candidates []string) string {
	if c, ok := Closest(name, candidates); ok {
		return "; did you mean \"" + c + "\"?"
	}
	return ""
}

// distance is the optimal-string-alignment distance between a and b, over
// runes: Levenshtein plus adjacent transpositions ("claen" is one edit from
// "clean"), the commonest typo.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	rows := [3][]int{make([]int, len(rb)+1), make([]int, len(rb)+1), make([]int, len(rb)+1)}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		// rows[i%3] is row i; (i+2)%3 is row i-1 and (i+1)%3 is row i-2.
		cur, prev, prev2 := rows[i%3], rows[(i+2)%3], rows[(i+1)%3]
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
	}
	return rows[len(ra)%3][len(rb)]
}
