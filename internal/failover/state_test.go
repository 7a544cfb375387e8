package failover

import (
	"strings"
	"testing"
)

var two = []string{"w1", "w2"}

// step starts the task on w (which must be allowed) and returns the state.
func mustStart(t *testing.T, s *State, l Limits, w string, live []string) {
	t.Helper()
	if err := s.Start(l, w, live); err != nil {
		t.Fatal(err)
	}
}

// A graceful shutdown counts nowhere: the task is as before the start, and
// the other worker takes it without a failover being counted.
func TestShutDownNotCounted(t *testing.T) {
	l := Limits{Attempts: 1, PerWorker: 2, Global: 3}
	var s State
	mustStart(t, &s, l, "w1", two)
	if n := s.ShutDown(l); n != FailOver {
		t.Fatalf("ShutDown = %v", n)
	}
	if s.Failovers != 0 || s.Visits["w1"] != 0 || s.Starts != 0 {
		t.Fatalf("after shutdown of the first start: %+v", s)
	}
	if s.CanStart(l, "w1", two) {
		t.Fatal("the worker that shut down may take the task back while w2 is live")
	}
	mustStart(t, &s, l, "w2", two)
	if s.Failovers != 0 {
		t.Fatalf("moving after a shutdown counted a failover: %+v", s)
	}
	// w2 fails: a counted failover to w1; then w1 shuts down: uncounted,
	// back to w2 as before w1's start.
	if n := s.Failed(l, true, false); n != FailOver {
		t.Fatalf("Failed = %v", n)
	}
	mustStart(t, &s, l, "w1", two)
	if s.Failovers != 1 {
		t.Fatalf("failovers = %d, want 1", s.Failovers)
	}
	s.ShutDown(l)
	if s.Failovers != 0 || s.Pending != Counted || s.Last != "w2" {
		t.Fatalf("shutdown after a failover did not undo it: %+v", s)
	}
	if got := s.Describe(l, two); got != "w1 0 of 2, w2 1 of 2, global 0 of 3" {
		t.Fatalf("Describe = %q", got)
	}
	// Only w2 is live now: it may take the task back (one worker alone
	// still gets its per_worker visits).
	if !s.CanStart(l, "w2", []string{"w2"}) {
		t.Fatal("w2 alone may not restart the task")
	}
}

// The worked case global = 4 waits with two workers; a third worker joining
// takes it once (global 4 of 4), then the task stops.
func TestJoinedWorker(t *testing.T) {
	l := Limits{Attempts: 1, PerWorker: 2, Global: 4}
	var s State
	for _, w := range []string{"w1", "w2", "w1", "w2"} {
		mustStart(t, &s, l, w, two)
		if n := s.Failed(l, true, false); n != FailOver {
			t.Fatalf("after %s: %v", w, n)
		}
	}
	if !s.Waiting(l, two) || s.Failovers != 3 {
		t.Fatalf("not waiting with global 3 of 4: %+v", s)
	}
	three := []string{"w1", "w2", "w3"}
	if s.Waiting(l, three) || !s.CanStart(l, "w3", three) {
		t.Fatalf("a joined w3 cannot take the waiting task: %+v", s)
	}
	mustStart(t, &s, l, "w3", three)
	if s.Failovers != 4 {
		t.Fatalf("failovers = %d, want 4", s.Failovers)
	}
	if n := s.Failed(l, true, false); n != Stop || !s.Stopped {
		t.Fatalf("after w3 failed: %v %+v", n, s)
	}
	if s.CanStart(l, "w3", three) {
		t.Fatal("a stopped task may start")
	}
}

// A lost lease ends the visit even when retries are left, and counts; with
// no failover block it moves for free and never stops the task.
func TestLeaseLost(t *testing.T) {
	l := Limits{Attempts: 3, PerWorker: 2, Global: 1}
	var s State
	mustStart(t, &s, l, "w1", two)
	if n := s.Failed(l, true, false); n != Retry {
		t.Fatalf("first failure with 3 attempts a visit: %v", n)
	}
	mustStart(t, &s, l, "w1", two)
	if n := s.LeaseLost(l); n != FailOver || s.CanStart(l, "w1", two) || !s.CanStart(l, "w2", two) {
		t.Fatalf("LeaseLost = %v, %+v", n, s)
	}
	mustStart(t, &s, l, "w2", two)
	if n := s.LeaseLost(l); n != Stop {
		t.Fatalf("second lost lease with global = 1: %v", n)
	}

	free := Limits{Attempts: 1, NoFailover: true}
	var f State
	for i := 0; i < 5; i++ {
		w := two[i%2]
		mustStart(t, &f, free, w, two)
		if n := f.LeaseLost(free); n != FailOver {
			t.Fatalf("lost lease %d without a failover block: %v", i, n)
		}
	}
	if f.Failovers != 0 {
		t.Fatalf("free moves counted: %+v", f)
	}
	mustStart(t, &f, free, "w2", two)
	if n := f.Failed(free, false, false); n != Stop {
		t.Fatalf("a failure without a failover block: %v, want stop", n)
	}
}

// A deterministic failure stops at once; a retryable one retries within the
// visit's attempts.
func TestFailedClasses(t *testing.T) {
	l := Limits{Attempts: 2, PerWorker: 2, Global: 3}
	var s State
	mustStart(t, &s, l, "w1", two)
	if n := s.Failed(l, true, false); n != Retry {
		t.Fatalf("retryable: %v", n)
	}
	mustStart(t, &s, l, "w1", two)
	if n := s.Failed(l, false, true); n != Stop {
		t.Fatalf("deterministic: %v", n)
	}
	if err := s.Start(l, "w2", two); err == nil || !strings.Contains(err.Error(), "may not start") {
		t.Fatalf("Start after stop: %v", err)
	}
}
