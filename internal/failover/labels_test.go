package failover

import (
	"slices"
	"testing"
)

func TestEligible(t *testing.T) {
	for _, tc := range []struct {
		required, offered []string
		want              bool
	}{
		{nil, nil, true},
		{nil, []string{"spark"}, true},
		{[]string{"spark"}, nil, false},
		{[]string{"spark"}, []string{"gpu", "spark"}, true},
		{[]string{"gpu", "spark"}, []string{"spark"}, false},
		{[]string{"gpu", "spark"}, []string{"spark", "gpu", "x"}, true},
		{[]string{"spark"}, []string{"Spark", "spark-2"}, false},
	} {
		if got := Eligible(tc.required, tc.offered); got != tc.want {
			t.Errorf("Eligible(%q, %q) = %v, want %v", tc.required, tc.offered, got, tc.want)
		}
	}
	names := []string{"w1", "w2", "w3"}
	offered := [][]string{{"spark"}, {}, {"gpu", "spark"}}
	if got := EligibleNames([]string{"spark"}, names, offered); !slices.Equal(got, []string{"w1", "w3"}) {
		t.Errorf("EligibleNames(spark) = %q, want [w1 w3]", got)
	}
	if got := EligibleNames(nil, names, offered); !slices.Equal(got, names) {
		t.Errorf("EligibleNames(none) = %q, want every worker", got)
	}
	if got := EligibleNames([]string{"tpu"}, names, offered); len(got) != 0 {
		t.Errorf("EligibleNames(tpu) = %q, want none", got)
	}
}

// TestIneligibleWorkerIsNoWorker: the seed's per_worker = 2, global = 4
// case on three live workers of which only w1 and w3 offer the task's
// label: the story is that of two workers (w1, w3, w1, w3, then waiting),
// w2 never starts it, and it does not keep the task from waiting.
func TestIneligibleWorkerIsNoWorker(t *testing.T) {
	l := Limits{Attempts: 1, PerWorker: 2, Global: 4}
	live := EligibleNames([]string{"spark"}, []string{"w1", "w2", "w3"}, [][]string{{"spark"}, nil, {"spark"}})
	var s State
	var got []string
	for {
		i := s.Pick(l, live)
		if i < 0 {
			break
		}
		if err := s.Start(l, live[i], live); err != nil {
			t.Fatal(err)
		}
		got = append(got, live[i])
		if s.Failed(l, true, false) == Stop {
			t.Fatalf("stopped after %q", got)
		}
	}
	if !slices.Equal(got, []string{"w1", "w3", "w1", "w3"}) {
		t.Errorf("starts on %q, want w1 w3 w1 w3", got)
	}
	if !s.Waiting(l, live) {
		t.Error("not waiting with both eligible workers exhausted")
	}
	if s.CanStart(l, "w2", live) {
		t.Error("w2 may start it: it has no visits, but it is not eligible and must never be asked")
	}
	if got, want := WaitingFor([]string{"spark"}, l, &s, false), "waiting for a worker with labels spark: global count 3 of 4"; got != want {
		t.Errorf("WaitingFor = %q, want %q", got, want)
	}
	// The same story as the closed form on two workers.
	l.Workers = len(live)
	if tr := Simulate(l, 10); tr.String() != "w1, w2, w1, w2, then waiting for a worker" || tr.Failovers != s.Failovers {
		t.Errorf("Simulate on the %d eligible workers = %v (%d failovers), want the same story", len(live), tr, tr.Failovers)
	}
}

func TestWaitingFor(t *testing.T) {
	s := State{Failovers: 3}
	for _, tc := range []struct {
		labels   []string
		l        Limits
		noneLive bool
		want     string
	}{
		{nil, Limits{Global: 4}, false, "waiting for a worker: global count 3 of 4"},
		{[]string{"gpu", "spark"}, Limits{Global: 4}, false, "waiting for a worker with labels gpu,spark: global count 3 of 4"},
		{[]string{"spark"}, Limits{Global: NoLimit}, false, "waiting for a worker with labels spark: global count 3, unlimited"},
		{[]string{"spark"}, Limits{Global: 4}, true, "waiting for a worker with labels spark (none is live)"},
	} {
		if got := WaitingFor(tc.labels, tc.l, &s, tc.noneLive); got != tc.want {
			t.Errorf("WaitingFor(%q, %+v, %v) = %q, want %q", tc.labels, tc.l, tc.noneLive, got, tc.want)
		}
	}
}
