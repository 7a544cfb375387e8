package failover

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The four worked cases of docs/design.md section 6: a task that always ends in a
// run error, on two workers, per_worker = 2.
func TestWorkedCases(t *testing.T) {
	tests := []struct {
		name      string
		limits    Limits
		want      string
		end       End
		failovers int
	}{
		{"retries unlimited", Limits{Attempts: 0, PerWorker: 2, Global: 3, Workers: 2},
			"w1, w1, w1, w1, w1, w1, ... forever", Forever, -1},
		{"retries 1, global 3", Limits{Attempts: 1, PerWorker: 2, Global: 3, Workers: 2},
			"w1, w2, w1, w2, then stopped", Stopped, 3},
		{"retries 1, global 2", Limits{Attempts: 1, PerWorker: 2, Global: 2, Workers: 2},
			"w1, w2, w1, then stopped", Stopped, 2},
		{"retries 1, global 4", Limits{Attempts: 1, PerWorker: 2, Global: 4, Workers: 2},
			"w1, w2, w1, w2, then waiting for a worker", Waiting, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := Simulate(tt.limits, 6)
			if got := tr.String(); got != tt.want {
				t.Errorf("Simulate = %q, want %q", got, tt.want)
			}
			if tr.End != tt.end || tr.Failovers != tt.failovers {
				t.Errorf("end %v after %d failovers, want %v after %d", tr.End, tr.Failovers, tt.end, tt.failovers)
			}
		})
	}
}

func TestRetriesPerVisit(t *testing.T) {
	tr := Simulate(Limits{Attempts: 2, PerWorker: 1, Global: NoLimit, Workers: 2}, 100)
	if got, want := tr.String(), "w1, w1, w2, w2, then waiting for a worker"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	tr = Simulate(Limits{Attempts: 1, PerWorker: 0, Global: 0, Workers: 3}, 100)
	if got, want := tr.String(), "w1, then stopped"; got != want || tr.Unvisited != 2 {
		t.Errorf("got %q (unvisited %d), want %q (unvisited 2)", got, tr.Unvisited, want)
	}
	tr = Simulate(Limits{Attempts: 1, PerWorker: 0, Global: NoLimit, Workers: 2}, 5)
	if tr.End != Forever || len(tr.Workers) != 5 {
		t.Errorf("unlimited failover: %v", tr)
	}
}

// Outcome must agree with the step-by-step model wherever the model ends.
func TestOutcomeAgreesWithSimulate(t *testing.T) {
	for workers := 1; workers <= 4; workers++ {
		for attempts := 0; attempts <= 3; attempts++ {
			for per := 0; per <= 4; per++ {
				for global := NoLimit; global <= 12; global++ {
					l := Limits{Attempts: attempts, PerWorker: per, Global: global, Workers: workers}
					sim, out := Simulate(l, 1000), Outcome(l)
					sim.Workers = nil
					if diff := cmp.Diff(sim, out); diff != "" {
						t.Fatalf("%+v: Outcome differs from Simulate (-sim +outcome):\n%s", l, diff)
					}
				}
			}
		}
	}
}

func TestHostileLimits(t *testing.T) {
	l := Limits{Attempts: 1, PerWorker: 1 << 40, Global: 1 << 50, Workers: 2}
	o := Outcome(l)
	if o.End != Waiting || o.Visits != 1<<41 {
		t.Errorf("Outcome = %+v", o)
	}
	if tr := Simulate(l, 10); len(tr.Workers) != 10 || tr.End != Waiting {
		t.Errorf("Simulate = %+v", tr)
	}
	if o := Outcome(Limits{Attempts: 1, PerWorker: math.MaxInt, Global: math.MaxInt, Workers: 3}); o.Visits != math.MaxInt || o.Failovers != math.MaxInt-1 {
		t.Errorf("saturated limits: %+v", o)
	}
	if o := Outcome(Limits{Attempts: -3, PerWorker: -1, Global: -7, Workers: -2}); o.End != Forever {
		t.Errorf("negative limits: %+v", o)
	}
}
