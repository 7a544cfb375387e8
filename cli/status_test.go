package cli

import "testing"

func TestIsRunID(t *testing.T) {
	for arg, want := range map[string]bool{
		"orders/2024-01-01/r1":                 true,
		"orders/2024-01-01T06:00:00Z/r12":      true,
		"a/b/c/r3":                             true,
		"orders/2024-01-01/r":                  false,
		"orders/2024-01-01/rx":                 false,
		"orders/r1":                            false,
		"pipeline.hcl":                         false,
		"examples/orders/pipeline.hcl":         false,
		"orders/2024-01-01/r-1":                false,
		"orders/2024-01-01/r99999999999999999": false,
		"":                                     false,
	} {
		if got := isRunID(arg); got != want {
			t.Errorf("isRunID(%q) = %v, want %v", arg, got, want)
		}
	}
}
