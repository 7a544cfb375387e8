package retry

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

var classes = []Class{
	{Name: "schema", ExitCodes: []int{65}, Match: []string{"bad header"}, Deterministic: true},
	{Name: "transient", ExitCodes: []int{75}, Match: []string{"connection reset", "503"}},
}

func TestClassify(t *testing.T) {
	c := NewClassifier(classes)
	for _, tc := range []struct {
		name string
		e    Ending
		want string
		det  bool
	}{
		{"exit code", Ending{ExitCode: 75}, "transient", false},
		{"deterministic exit code", Ending{ExitCode: 65}, "schema", true},
		{"output pattern", Ending{ExitCode: 1, Output: "GET /x: 503 Service Unavailable"}, "transient", false},
		{"deterministic wins over transient", Ending{ExitCode: 75, Output: "bad header"}, "schema", true},
		{"exit code before pattern", Ending{ExitCode: 75, Output: "nothing"}, "transient", false},
		{"unclassified", Ending{ExitCode: 1, Output: "boom"}, Unclassified, false},
		{"timeout", Ending{ExitCode: -1, TimedOut: true}, Timeout, false},
		{"killed", Ending{ExitCode: -1, Signaled: true}, Killed, false},
		{"signal is not an exit code", Ending{ExitCode: 75, Signaled: true}, Killed, false},
		{"pattern explains a timeout", Ending{ExitCode: -1, TimedOut: true, Output: "connection reset by peer"}, "transient", false},
	} {
		v := c.Classify(tc.e)
		if v.Class != tc.want || v.Deterministic != tc.det || v.Reason == "" {
			t.Errorf("%s: got %+v, want %s (deterministic %v)", tc.name, v, tc.want, tc.det)
		}
	}
	if !c.Deterministic("schema") || c.Deterministic("transient") || c.Deterministic("nope") {
		t.Error("Deterministic lookup wrong")
	}
}

func TestBackoff(t *testing.T) {
	p := &Policy{Initial: 10 * time.Second, Multiplier: 2, MaxDelay: time.Minute}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}
	for i, w := range want {
		if got := p.Backoff(i + 1); got != w {
			t.Errorf("Backoff(%d) = %s, want %s", i+1, got, w)
		}
	}
	huge := &Policy{Initial: time.Hour, Multiplier: 10}
	if got := huge.Backoff(100); got <= 0 {
		t.Errorf("Backoff overflowed: %s", got)
	}
}

func TestJitter(t *testing.T) {
	d := 10 * time.Second
	r := NewRand(1)
	none := &Policy{Jitter: JitterNone}
	full := &Policy{Jitter: JitterFull}
	equal := &Policy{Jitter: JitterEqual}
	distinct := map[time.Duration]bool{}
	for i := 0; i < 200; i++ {
		if got := none.Jittered(d, r, "t", i); got != d {
			t.Fatalf("none: %s", got)
		}
		f := full.Jittered(d, r, "t", i)
		if f < 0 || f > d {
			t.Fatalf("full out of range: %s", f)
		}
		distinct[f] = true
		if e := equal.Jittered(d, r, "t", i); e < d/2 || e > d {
			t.Fatalf("equal out of range: %s", e)
		}
	}
	if len(distinct) < 100 {
		t.Errorf("full jitter drew only %d distinct delays in 200", len(distinct))
	}
	// The same seed draws the same delays.
	a, b := NewRand(42), NewRand(42)
	for i := 0; i < 20; i++ {
		if x, y := full.Jittered(d, a, "t", i), full.Jittered(d, b, "t", i); x != y {
			t.Fatalf("draw %d differs with the same seed: %s vs %s", i, x, y)
		}
	}
	if full.Jittered(d, nil, "t", 1) != d {
		t.Error("nil source should not jitter")
	}
}

// counter is an Account in memory, as a store keeps it: first tasks
// started, used retries.
type counter struct {
	budget      Budget
	first, used int
	err         error
}

func (c *counter) Take() (Usage, error) {
	if c.err != nil {
		return Usage{}, c.err
	}
	u := Usage{Used: c.used, Allowed: c.budget.Allowed(c.first)}
	if u.Used < u.Allowed {
		c.used++
		u.Taken, u.Used = true, c.used
	}
	return u, nil
}

func TestBudgetAllowed(t *testing.T) {
	b := Budget{Ratio: 0.2, Min: 3}
	for _, tc := range []struct{ first, want int }{{0, 3}, {1, 3}, {15, 3}, {20, 4}, {24, 4}, {25, 5}} {
		if got := b.Allowed(tc.first); got != tc.want {
			t.Errorf("Allowed(%d) = %d, want %d", tc.first, got, tc.want)
		}
	}
}

func TestDecideBudget(t *testing.T) {
	b := &counter{budget: Budget{Ratio: 0, Min: 1}, first: 5}
	pol := &Policy{Name: "p", MaxAttempts: 10, Initial: time.Second, Jitter: JitterNone}
	in := Input{Policy: pol, Idempotent: true, Verdict: Verdict{Class: "transient"}, Attempt: 1, Budget: b}
	// A refused retry (deterministic) must not spend the budget.
	det := in
	det.Verdict.Deterministic = true
	if Decide(det).Retry {
		t.Fatal("deterministic retried")
	}
	if !Decide(in).Retry {
		t.Fatal("first retry refused")
	}
	d := Decide(in)
	if d.Retry || !d.Spent || d.Reason != "the run's retry budget is spent (1 of 1 retries used)" {
		t.Fatalf("second retry: %+v", d)
	}
	// A budget that cannot be read retries nothing, and says why.
	b.err = errors.New("database is locked")
	d = Decide(in)
	if d.Retry || d.Err == nil || !strings.Contains(d.Reason, "could not be read: database is locked") {
		t.Fatalf("unreadable budget: %+v", d)
	}
}

func TestDecideJitterSeeded(t *testing.T) {
	pol := &Policy{Name: "p", MaxAttempts: 10, Initial: 10 * time.Second, Multiplier: 2, MaxDelay: time.Hour, Jitter: JitterFull}
	draw := func(seed uint64) []time.Duration {
		r := NewRand(seed)
		var out []time.Duration
		for a := 1; a < 6; a++ {
			d := Decide(Input{Policy: pol, Idempotent: true, Verdict: Verdict{Class: "x"}, Attempt: a, Rand: r, Task: "t"})
			if !d.Retry || d.Delay < 0 || d.Delay > pol.Backoff(a) {
				t.Fatalf("attempt %d: %+v", a, d)
			}
			out = append(out, d.Delay)
		}
		return out
	}
	a, b := draw(7), draw(7)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seeded draws differ: %v vs %v", a, b)
		}
	}
}

// TestJitterIndependentOfOrder: each draw depends on the seed, the task and
// the attempt only, so drawing in another order, from many goroutines at
// once, or after other tasks' draws gives every (task, attempt) the same
// delay; another task, attempt or seed gives another one.
func TestJitterIndependentOfOrder(t *testing.T) {
	pol := &Policy{Jitter: JitterFull}
	d := time.Hour
	type key struct {
		task    string
		attempt int
	}
	var keys []key
	for _, task := range []string{"extract", "clean", "load", "a", "ab", "b"} {
		for a := 1; a <= 5; a++ {
			keys = append(keys, key{task, a})
		}
	}
	forward := map[key]time.Duration{}
	r := NewRand(99)
	for _, k := range keys {
		forward[k] = pol.Jittered(d, r, k.task, k.attempt)
	}
	// Backwards, concurrently, on a fresh source with the same seed.
	r2 := NewRand(99)
	got := make([]time.Duration, len(keys))
	var wg sync.WaitGroup
	for i := len(keys) - 1; i >= 0; i-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = pol.Jittered(d, r2, keys[i].task, keys[i].attempt)
		}()
	}
	wg.Wait()
	distinct := map[time.Duration]bool{}
	for i, k := range keys {
		if got[i] != forward[k] {
			t.Errorf("%s attempt %d: %s in one order, %s in another", k.task, k.attempt, forward[k], got[i])
		}
		distinct[got[i]] = true
	}
	if len(distinct) != len(keys) {
		t.Errorf("%d distinct delays for %d (task, attempt) pairs: draws are not keyed by task and attempt", len(distinct), len(keys))
	}
	// "a" attempt 11 and "a1" attempt 1 must not share a key.
	if pol.Jittered(d, r, "a", 11) == pol.Jittered(d, r, "a1", 1) {
		t.Error(`("a", 11) and ("a1", 1) drew the same delay`)
	}
	other := NewRand(100)
	same := 0
	for _, k := range keys {
		if pol.Jittered(d, other, k.task, k.attempt) == forward[k] {
			same++
		}
	}
	if same > 0 {
		t.Errorf("another seed drew %d of %d delays identically", same, len(keys))
	}
}
