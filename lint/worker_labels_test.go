package lint

import "testing"

// The pool's labels describe the pool Workers counts: a list of another
// length is a caller's mistake (pipec lint --workers must drop the file's
// list), refused by CheckOptions rather than silently half-applied.
func TestCheckOptionsWorkerLabels(t *testing.T) {
	pool := [][]string{{"spark"}, nil, {"gpu"}}
	if err := CheckOptions(Options{Workers: 3, WorkerLabels: pool}); err != nil {
		t.Errorf("a described pool of 3: %v", err)
	}
	for _, n := range []int{0, 2, 4} {
		if err := CheckOptions(Options{Workers: n, WorkerLabels: pool}); err == nil {
			t.Errorf("3 workers' labels for a pool of %d accepted", n)
		}
	}
}
