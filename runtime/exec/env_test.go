package exec

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestEnvOver: e over base renders what List renders of the two merged in
// a map, e's values winning, for environments that share variables, hold
// "=" in values, and have names ordered apart by '=' ("A" and "A0").
func TestEnvOver(t *testing.T) {
	names := []string{"A", "A0", "A_", "AB", "B", "PATH", "HOME", "PIPEC_TASK", "PIPEC_TASK_X", "Z", "a", "LC_ALL"}
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 2000 {
		base, over := Env{}, Env{}
		for _, k := range names {
			switch r.IntN(4) {
			case 0:
				base[k] = fmt.Sprintf("b%d", r.IntN(3))
			case 1:
				over[k] = fmt.Sprintf("o=%d", r.IntN(3))
			case 2:
				base[k], over[k] = "b", fmt.Sprintf("o%d", r.IntN(3))
			}
		}
		want := Env{}
		for k, v := range base {
			want[k] = v
		}
		for k, v := range over {
			want[k] = v
		}
		if got := over.Over(base.List()); !slices.Equal(got, want.List()) {
			t.Fatalf("case %d: %v over %v:\n got %q\nwant %q", n, over, base, got, want.List())
		}
	}
	if got := (Env{}).Over(nil); len(got) != 0 {
		t.Fatalf("nothing over nothing: %q", got)
	}
}
