// Package failover is a small model of how a task that keeps failing moves
// across workers (docs/design.md section 6). The linter uses it to explain, before
// anything runs, where a task's failover limits lead: retried forever on one
// worker, stopped, or waiting for a worker.
//
// The model, for a task that always ends in a run error:
//
//   - A visit starts the task on a worker. The pipeline's retry policy retries
//     it on that worker: a visit is at most Attempts attempts (the first start
//     counts). With unlimited attempts the visit never ends, so the task never
//     fails over.
//   - When a visit ends in failure the task fails over: the failover is
//     counted, and the task starts on the next worker (in order, wrapping
//     around) that has had fewer than PerWorker visits.
//   - When a failover would exceed Global the job stops (failed). When every
//     worker has had PerWorker visits but Global is not reached the job waits,
//     active and in error, for a new worker.
//
// The step-by-step rules live in State (state.go), which the runtime keeps
// per task in the store and steps on every start, failure, lost lease and
// shutdown; Simulate steps the same State, and Outcome is its closed form.
// A worker shutdown fails over without counting, a lost lease counts as a
// failure of the worker, and a joining worker is one more that may start
// a waiting task.
//
// The workers of a task's story are those that may run it: a task that
// requires labels has for workers only those offering all of them
// (Eligible), and "every worker exhausted" means every such worker.
package failover

import (
	"fmt"
	"math"
	"strings"
)

// NoLimit marks Global as unlimited. Global = 0 is meaningful (never fail over),
// so unlimited needs its own value; Attempts and PerWorker use 0 for unlimited,
// as the spec does.
const NoLimit = -1

// Limits describe one task on a set of workers.
type Limits struct {
	// Attempts is how many attempts one visit to a worker may make (the retry
	// policy's max_attempts; 1 when the task has no policy); 0 is unlimited.
	Attempts int
	// PerWorker is how many visits one worker may get; 0 is unlimited.
	PerWorker int
	// Global is how many failovers are allowed before the job stops; NoLimit is unlimited.
	Global int
	// Workers is how many workers can run the task (at least 1); only the
	// model's closed forms use it (the runtime passes the live workers).
	Workers int
	// NoFailover: the task has no failover block. Its failures end it on its
	// worker once the retry policy gives up (as in a local run), and a lost
	// worker moves it without counting.
	NoFailover bool
}

// End is how a failing task's story ends.
type End int

const (
	// Forever: the task never stops failing and never stops being started.
	// Retrying forever on the first worker when Attempts is unlimited, or
	// failing over forever when neither PerWorker nor Global is limited.
	Forever End = iota
	// Stopped: a failover would exceed Global; the job fails.
	Stopped
	// Waiting: every worker had its PerWorker visits and Global is not reached;
	// the job waits, active and in error, for a new worker.
	Waiting
)

func (e End) String() string {
	switch e {
	case Forever:
		return "forever"
	case Stopped:
		return "stopped"
	case Waiting:
		return "waiting for a worker"
	}
	return fmt.Sprintf("end(%d)", int(e))
}

// Trace is what happens to the task, attempt by attempt.
type Trace struct {
	// Workers lists the 0-based worker of each attempt in order. Simulate cuts
	// it at its step limit.
	Workers []int
	// Visits is how many visits happened (Outcome: may exceed len(Workers)).
	Visits int
	// Failovers is how many failovers were counted.
	Failovers int
	// End is how it ends.
	End End
	// Unvisited is how many workers never ran the task; Short is how many
	// workers got fewer than PerWorker visits (0 when PerWorker is unlimited).
	Unvisited, Short int
}

// String writes the trace as in docs/design.md section 6: "w1, w2, w1, w2, then stopped".
func (t Trace) String() string {
	var b strings.Builder
	for i, w := range t.Workers {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "w%d", w+1)
	}
	if t.End == Forever {
		b.WriteString(", ... forever")
		return b.String()
	}
	fmt.Fprintf(&b, ", then %s", t.End)
	return b.String()
}

// Simulate steps the model attempt by attempt, for at most maxAttempts
// attempts, on workers w1..wN picked round-robin: the next worker after the
// one left that State.CanStart accepts. When the limit cuts a story that
// would still end, End is what it would be, computed by Outcome; a story cut
// while going on forever is Forever. It is the reference for Outcome, and
// what tests and messages show; it steps the same State as the runtime.
func Simulate(l Limits, maxAttempts int) Trace {
	l = normalize(l)
	names := WorkerNames(l.Workers)
	var s State
	var t Trace
	for {
		w := s.Pick(l, names)
		if w < 0 {
			t.End = Waiting
			return finishState(t, l, &s, names)
		}
		if len(t.Workers) >= maxAttempts {
			return cut(t, l)
		}
		if s.Start(l, names[w], names) != nil {
			t.End = Waiting // unreachable: Pick only returns workers CanStart accepts
			return finishState(t, l, &s, names)
		}
		t.Workers = append(t.Workers, w)
		if s.Failed(l, true, false) == Stop {
			t.End = Stopped
			return finishState(t, l, &s, names)
		}
	}
}

// WorkerNames is w1..wn.
func WorkerNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("w%d", i+1)
	}
	return out
}

// Pick is the index in workers of the worker the simulator starts the task
// on next: the current visit's for a retry, else the first after the one
// left (round-robin) that CanStart accepts; -1 when none may (waiting, or
// stopped).
func (s *State) Pick(l Limits, workers []string) int {
	from := -1
	for i, w := range workers {
		if w == s.Worker && s.Worker != "" {
			return i
		}
		if w == s.Last {
			from = i
		}
	}
	for k := 1; k <= len(workers); k++ {
		i := (from + k) % len(workers)
		if i < 0 {
			i += len(workers)
		}
		if s.CanStart(l, workers[i], workers) {
			return i
		}
	}
	return -1
}

func finishState(t Trace, l Limits, s *State, names []string) Trace {
	t.Failovers = s.Failovers
	visits := make([]int, len(names))
	for i, w := range names {
		visits[i] = s.Visits[w]
		t.Visits += visits[i]
	}
	return finish(t, l, visits)
}

// cut ends a simulation stopped by its step limit.
func cut(t Trace, l Limits) Trace {
	o := Outcome(l)
	t.End, t.Visits, t.Failovers, t.Unvisited, t.Short = o.End, o.Visits, o.Failovers, o.Unvisited, o.Short
	return t
}

func finish(t Trace, l Limits, visits []int) Trace {
	for _, v := range visits {
		if v == 0 {
			t.Unvisited++
		}
		if l.PerWorker > 0 && v < l.PerWorker {
			t.Short++
		}
	}
	return t
}

// Outcome computes where the story ends without stepping through it, in
// constant time, so hostile limits (per_worker = 1e9) cost nothing. Workers is
// left empty. It agrees with Simulate (tested).
func Outcome(l Limits) Trace {
	l = normalize(l)
	if l.Attempts == 0 || (l.PerWorker == 0 && l.Global == NoLimit) {
		return Trace{End: Forever, Visits: -1, Failovers: -1}
	}
	// Visits go round-robin: visit i runs on worker i mod Workers, because the
	// next worker with visits left is always the following one.
	byWorkers := -1 // visits allowed by PerWorker; -1 is unlimited
	if l.PerWorker > 0 {
		byWorkers = math.MaxInt // saturate rather than overflow on hostile limits
		if l.PerWorker <= math.MaxInt/l.Workers {
			byWorkers = l.Workers * l.PerWorker
		}
	}
	byGlobal := -1 // visits allowed by Global
	if l.Global != NoLimit {
		byGlobal = l.Global + min(1, math.MaxInt-l.Global)
	}
	var t Trace
	switch {
	case byWorkers < 0 || (byGlobal >= 0 && byGlobal <= byWorkers):
		t.End, t.Visits = Stopped, byGlobal
	default:
		t.End, t.Visits = Waiting, byWorkers
	}
	t.Failovers = t.Visits - 1
	if t.Visits < l.Workers {
		t.Unvisited = l.Workers - t.Visits
	}
	if l.PerWorker > 0 {
		// The first Visits mod Workers workers had one visit more than the others.
		full, extra := t.Visits/l.Workers, t.Visits%l.Workers
		switch {
		case full >= l.PerWorker:
		case full+1 >= l.PerWorker && extra > 0:
			t.Short = l.Workers - extra
		default:
			t.Short = l.Workers
		}
	}
	return t
}

func normalize(l Limits) Limits {
	if l.Workers < 1 {
		l.Workers = 1
	}
	if l.Attempts < 0 {
		l.Attempts = 1
	}
	if l.PerWorker < 0 {
		l.PerWorker = 0
	}
	if l.Global < NoLimit {
		l.Global = NoLimit
	}
	return l
}
