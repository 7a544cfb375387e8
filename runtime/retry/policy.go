package retry

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Jitter modes (the spec's jitter field).
const (
	JitterFull  = "full"  // a delay uniformly drawn from [0, d]
	JitterEqual = "equal" // d/2 plus a draw from [0, d/2]
	JitterNone  = "none"  // exactly d
)

// Policy is a task's retry policy with defaults applied.
type Policy struct {
	Name string
	// MaxAttempts counts the first attempt; 0 means unlimited.
	MaxAttempts int
	Initial     time.Duration
	Multiplier  float64
	MaxDelay    time.Duration
	Jitter      string
	// MaxElapsed bounds the time from the first attempt's start to the start
	// of a retry; 0 means no bound.
	MaxElapsed time.Duration
	// On lists the retried classes; empty means every non-deterministic class.
	On []string
}

// Retries reports whether the policy names the class.
func (p *Policy) Retries(class string) bool {
	return len(p.On) == 0 || slices.Contains(p.On, class)
}

// Backoff is the delay before retry n (1 for the first retry) before jitter:
// Initial × Multiplier^(n-1), capped at MaxDelay.
func (p *Policy) Backoff(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	m := p.Multiplier
	if m < 1 {
		m = 1
	}
	d := float64(p.Initial) * math.Pow(m, float64(n-1))
	if p.MaxDelay > 0 && d > float64(p.MaxDelay) {
		return p.MaxDelay
	}
	if d >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(d)
}

// Rand is the jitter source. It holds only the seed: every draw is derived
// from (seed, task, attempt) alone, so a given task's retry after a given
// attempt waits the same time whatever order the scheduler ran tasks in, how
// many other tasks retried before it, or how many goroutines draw at once.
// A shared stream would hand out its numbers in scheduling order and make
// `--seed` reproduce nothing in a parallel run.
type Rand struct {
	seed uint64
}

// NewRand seeds a jitter source.
func NewRand(seed uint64) *Rand { return &Rand{seed: seed} }

// Jittered applies the policy's jitter to d for the retry after the given
// attempt of task; a nil source means no jitter.
func (p *Policy) Jittered(d time.Duration, r *Rand, task string, attempt int) time.Duration {
	if d <= 0 {
		return 0
	}
	if r == nil {
		return d
	}
	switch p.Jitter {
	case JitterNone:
		return d
	case JitterEqual:
		return d/2 + r.draw(task, attempt, int64(d/2)+1)
	default: // full, the default
		return r.draw(task, attempt, int64(d)+1)
	}
}

// draw is a uniform number in [0, n) from a generator keyed by the seed, the
// task's name and the attempt number: SHA-256 of the three, length-prefixed
// so that no two (task, attempt) pairs share a key, seeds a PCG whose first
// bounded draw is the result.
func (r *Rand) draw(task string, attempt int, n int64) time.Duration {
	h := sha256.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], r.seed)
	h.Write(b[:])
	binary.BigEndian.PutUint64(b[:], uint64(len(task)))
	h.Write(b[:])
	h.Write([]byte(task))
	binary.BigEndian.PutUint64(b[:], uint64(attempt))
	h.Write(b[:])
	sum := h.Sum(nil)
	g := rand.New(rand.NewPCG(binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16])))
	return time.Duration(g.Int64N(n))
}

// Budget caps retries across one run: at most Ratio × the run's first
// attempts so far, but always at least Min.
type Budget struct {
	Ratio float64
	Min   int
}

// Allowed is how many retries the budget allows once first of the run's
// tasks have started.
func (b Budget) Allowed(first int) int {
	return max(b.Min, int(math.Floor(b.Ratio*float64(first))))
}

// Account is where a run's retries are counted against its Budget. The
// count is the run's, not one process's: a run whose tasks several
// workers visit spends one budget (the runtime keeps it in the state).
type Account interface {
	// Take uses one retry if the budget allows it, and says how many were
	// used (this one included when taken) and allowed. An error (the
	// count could not be read) takes nothing.
	Take() (Usage, error)
}

// Usage is an Account's answer: whether the retry was taken, the retries
// used and the retries allowed.
type Usage struct {
	Taken         bool
	Used, Allowed int
}

// Input is what Decide needs to know about a failed attempt.
type Input struct {
	// Policy is nil when the task has no retry policy.
	Policy *Policy
	// Idempotent is false for a task that declared idempotent = false (or
	// effects without saying): it is never retried.
	Idempotent bool
	Verdict    Verdict
	// Attempt is the number of the attempt that failed (1 for the first).
	Attempt int
	// Elapsed is the time since the task's first attempt started.
	Elapsed time.Duration
	// LeaseExpired: the attempt is unknown (its lease expired), not failed.
	// The relaunch does not depend on the class filter and has no backoff,
	// but is bounded like any retry. Without a policy one relaunch is allowed.
	LeaseExpired bool
	// Budget is the run's retry budget; nil is unlimited.
	Budget Account
	// Rand draws the jitter; Task names the task whose attempt failed, one
	// of the draw's keys with Attempt and the seed.
	Rand *Rand
	Task string
}

// StoreNotRetried is why a failure of class Store is not retried.
const StoreNotRetried = "the state database could not record it: not retried (the next run of the interval resumes)"

// Decision is whether to retry, after how long, and why (or why not).
type Decision struct {
	Retry bool
	Delay time.Duration
	// Reason explains the decision for the event log and the summary.
	Reason string
	// Spent: the policy would retry, but the run's retry budget is spent.
	Spent bool
	// Err: the run's retry budget could not be read (Account.Take), so
	// nothing was retried.
	Err error
}

// Decide applies the rules in order: deterministic classes fail at once; a
// non-idempotent task is never retried; the policy must name the class; the
// attempt and elapsed-time bounds must allow one more; the run's budget must
// have a retry left (checked last, so a refused retry never spends it).
func Decide(in Input) Decision {
	if in.Verdict.Class == Store && !in.LeaseExpired {
		return Decision{Reason: StoreNotRetried}
	}
	if in.Verdict.Deterministic && !in.LeaseExpired {
		return Decision{Reason: fmt.Sprintf("class %s is deterministic: not retried", in.Verdict.Class)}
	}
	if !in.Idempotent {
		return Decision{Reason: "the task is not idempotent: never retried"}
	}
	p := in.Policy
	if p == nil {
		if !in.LeaseExpired {
			return Decision{Reason: "the task has no retry policy"}
		}
		p = &Policy{MaxAttempts: 2}
	}
	if !in.LeaseExpired && !p.Retries(in.Verdict.Class) {
		return Decision{Reason: fmt.Sprintf("retry policy %s does not retry class %s", p.Name, in.Verdict.Class)}
	}
	if p.MaxAttempts > 0 && in.Attempt >= p.MaxAttempts {
		return Decision{Reason: fmt.Sprintf("%d of %d attempts used", in.Attempt, p.MaxAttempts)}
	}
	var delay time.Duration
	if !in.LeaseExpired {
		delay = p.Jittered(p.Backoff(in.Attempt), in.Rand, in.Task, in.Attempt)
	}
	if p.MaxElapsed > 0 && in.Elapsed+delay > p.MaxElapsed {
		return Decision{Reason: fmt.Sprintf("max_elapsed %s would be exceeded", p.MaxElapsed)}
	}
	if in.Budget != nil {
		u, err := in.Budget.Take()
		if err != nil {
			return Decision{Reason: "the run's retry budget could not be read: " + err.Error(), Err: err}
		}
		if !u.Taken {
			return Decision{Reason: fmt.Sprintf("the run's retry budget is spent (%d of %d retries used)", u.Used, u.Allowed), Spent: true}
		}
	}
	if in.LeaseExpired {
		return Decision{Retry: true, Reason: "lease expired: relaunched with a new token"}
	}
	return Decision{Retry: true, Delay: delay, Reason: fmt.Sprintf("class %s is retried by policy %s", in.Verdict.Class, p.Name)}
}
