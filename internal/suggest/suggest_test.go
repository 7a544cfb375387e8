package suggest

import "testing"

func TestClosest(t *testing.T) {
	cands := []string{"clean", "extract", "load"}
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"extrct", "extract", true},
		{"claen", "clean", true},
		{"lod", "load", true},
		{"publish", "", false},
		{"load", "", false}, // an exact match is not a suggestion
	} {
		got, ok := Closest(tc.name, cands)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Closest(%q) = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if h := Hint("extrct", cands); h != `; did you mean "extract"?` {
		t.Errorf("Hint = %q", h)
	}
}
