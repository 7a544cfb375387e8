package failover

import (
	"fmt"
	"slices"
	"sort"
)

// Move says how the task leaves a worker whose visit ended.
type Move string

const (
	// NoMove: nothing pending (before the first start, during a visit, or
	// after the task stopped).
	NoMove Move = ""
	// Counted: a failover after a failure; it counts against Global when
	// another worker starts the task.
	Counted Move = "counted"
	// Free: a move that counts against nothing (the worker shut down, or was
	// lost while the task has no failover block).
	Free Move = "free"
)

// Next is what a task does after an attempt ended without success.
type Next int

const (
	// Retry: start again on the same worker (a retry of this visit).
	Retry Next = iota
	// FailOver: start on another worker that still has visits left; when no
	// live worker has, the task waits for one (see State.Waiting).
	FailOver
	// Stop: the task fails (Global reached, or a deterministic failure).
	Stop
)

func (n Next) String() string {
	switch n {
	case Retry:
		return "retry"
	case FailOver:
		return "fail over"
	case Stop:
		return "stop"
	}
	return fmt.Sprintf("next(%d)", int(n))
}

// State is one task's failover story in one run, as the runtime keeps it in
// the store and the simulator steps it: which workers it visited, how many
// failovers were counted, where it is now. It is plain data (JSON), and its
// methods are the only rules: lint (through Simulate and Outcome),
// pipec simulate and pipec worker all step the same functions, so they
// cannot disagree.
//
// A visit is a run of consecutive attempts on one worker: the first start
// there and the retries of the task's retry policy (at most Limits.Attempts
// per visit). A visit that ends in failure fails the task over to another
// worker with visits left (fewer than PerWorker), counting one failover;
// a failover that would exceed Global stops the task. Three events are not
// failures of the task:
//
//   - a graceful shutdown of its worker (ShutDown) hands the attempt back as
//     if it had never started: no visit, no failover is counted;
//   - a lost lease (LeaseLost: the worker stopped renewing, by SIGSTOP,
//     SIGKILL or a partition) ends the visit; it is a worker failure, so it
//     counts like a failure when the task has a failover block, and moves the
//     task for free otherwise (the retry policy alone then decides whether it
//     is relaunched at all);
//   - a worker joining changes nothing here: it is one more worker that
//     CanStart may accept, which is how a waiting task goes on.
type State struct {
	// Visits counts visits per worker name.
	Visits map[string]int `json:"visits,omitempty"`
	// Failovers is how many failovers were counted.
	Failovers int `json:"failovers"`
	// Worker is the worker of the current visit; empty between visits.
	Worker string `json:"worker,omitempty"`
	// InVisit is how many attempts the current visit made.
	InVisit int `json:"in_visit,omitempty"`
	// Last is the worker whose visit ended last: a move goes elsewhere.
	Last string `json:"last,omitempty"`
	// Pending is the move waiting for a worker to start the task.
	Pending Move `json:"pending,omitempty"`
	// Stopped: the task failed for good.
	Stopped bool `json:"stopped,omitempty"`
	// Starts counts every start, handed-back ones excluded.
	Starts int `json:"starts"`

	// What ShutDown needs to undo the last start when it was a visit's
	// first: the move and Last before it.
	PrevPending Move   `json:"prev_pending,omitempty"`
	PrevLast    string `json:"prev_last,omitempty"`
}

// CanStart reports whether worker may start the task's next attempt, live
// being the workers able to run it now: live, and offering the task's labels
// (Eligible). A worker outside live may not start it at all. Otherwise: the
// worker of the current visit for a retry; for a move, a worker with visits
// left (PerWorker), other than the one just left unless no other live worker
// has visits left (so one worker alone still gets its PerWorker visits, as
// the round-robin of Simulate does); for the very first start, anyone.
func (s *State) CanStart(l Limits, worker string, live []string) bool {
	l = normalize(l)
	left := func(w string) bool { return l.PerWorker == 0 || s.Visits[w] < l.PerWorker }
	switch {
	case s.Stopped, !slices.Contains(live, worker):
		return false
	case s.Worker != "":
		return worker == s.Worker
	case s.Pending == NoMove:
		return true // the first start
	case !left(worker):
		return false
	case worker != s.Last:
		return true
	}
	for _, w := range live {
		if w != s.Last && left(w) {
			return false
		}
	}
	return true
}

// Start records that worker started the task. It fails when CanStart would
// refuse, so a caller cannot break the limits by mistake.
func (s *State) Start(l Limits, worker string, live []string) error {
	if worker == "" {
		return fmt.Errorf("failover: start on an unnamed worker")
	}
	if !s.CanStart(l, worker, live) {
		return fmt.Errorf("failover: %s may not start the task now (%s)", worker, s.Describe(l, nil))
	}
	s.Starts++
	if s.Worker == worker {
		s.InVisit++
		s.PrevPending, s.PrevLast = NoMove, ""
		return nil
	}
	s.PrevPending, s.PrevLast = s.Pending, s.Last
	if s.Pending == Counted {
		s.Failovers++
	}
	if s.Visits == nil {
		s.Visits = map[string]int{}
	}
	s.Visits[worker]++
	s.Worker, s.InVisit, s.Pending = worker, 1, NoMove
	return nil
}

// Failed records that the current attempt failed. retryable says the task's
// retry policy would retry this failure (its class, elapsed time, budget);
// the visit's attempt count is the model's to judge (Limits.Attempts).
// deterministic failures stop the task at once: they would fail anywhere.
func (s *State) Failed(l Limits, retryable, deterministic bool) Next {
	l = normalize(l)
	if s.Worker == "" || s.Stopped {
		return s.stop()
	}
	if deterministic {
		return s.stop()
	}
	if retryable && (l.Attempts == 0 || s.InVisit < l.Attempts) {
		return Retry
	}
	return s.leave(l, Counted)
}

// LeaseLost records that the current attempt's lease expired (its worker is
// unreachable): the visit ends, counted when failover is configured.
func (s *State) LeaseLost(l Limits) Next {
	if s.Worker == "" || s.Stopped {
		return s.stop()
	}
	if l.NoFailover {
		return s.leave(l, Free)
	}
	return s.leave(normalize(l), Counted)
}

// ShutDown records that the current attempt was handed back by a worker
// shutting down gracefully: it counts nowhere. A visit's first attempt is
// undone entirely (the task is as before that start); a later one ends the
// visit with a free move.
func (s *State) ShutDown(l Limits) Next {
	if s.Worker == "" || s.Stopped {
		return s.stop()
	}
	s.Starts--
	if s.InVisit == 1 {
		w := s.Worker
		s.Visits[w]--
		if s.Visits[w] <= 0 {
			delete(s.Visits, w)
		}
		if s.PrevPending == Counted {
			s.Failovers--
		}
		s.Worker, s.InVisit, s.Pending, s.Last = "", 0, s.PrevPending, s.PrevLast
		if s.Pending == NoMove {
			// It was the very first start: any worker may take it, but not
			// the one leaving if another can.
			s.Pending, s.Last = Free, w
		}
		s.PrevPending, s.PrevLast = NoMove, ""
		return FailOver
	}
	s.InVisit--
	s.Last, s.Worker, s.InVisit, s.Pending = s.Worker, "", 0, Free
	return FailOver
}

// leave ends the current visit with a move of kind m, or stops the task
// when a counted move would exceed Global.
func (s *State) leave(l Limits, m Move) Next {
	s.Last, s.Worker, s.InVisit = s.Worker, "", 0
	s.PrevPending, s.PrevLast = NoMove, ""
	if m == Counted && (l.NoFailover || (l.Global != NoLimit && s.Failovers+1 > l.Global)) {
		return s.stop()
	}
	s.Pending = m
	return FailOver
}

func (s *State) stop() Next {
	s.Stopped, s.Worker, s.InVisit, s.Pending = true, "", 0, NoMove
	return Stop
}

// Waiting reports whether the task waits for a worker: a move is pending and
// no live worker may start it. A free move may go back to the worker it
// left when no other is live (a shutdown of the only worker, which then
// comes back).
func (s *State) Waiting(l Limits, live []string) bool {
	if s.Stopped || s.Pending == NoMove {
		return false
	}
	for _, w := range live {
		if s.CanStart(l, w, live) {
			return false
		}
	}
	return true
}

// Describe writes the counts the way pipec simulate and pipec workers show
// them: "w1 1 of 2, w2 0 of 2, global 1 of 3". workers lists names to show
// even without visits; the rest are those visited, sorted.
func (s *State) Describe(l Limits, workers []string) string {
	l = normalize(l)
	names := append([]string(nil), workers...)
	seen := map[string]bool{}
	for _, w := range names {
		seen[w] = true
	}
	var extra []string
	for w := range s.Visits {
		if !seen[w] {
			extra = append(extra, w)
		}
	}
	sort.Strings(extra)
	names = append(names, extra...)
	out := ""
	for _, w := range names {
		if l.PerWorker > 0 {
			out += fmt.Sprintf("%s %d of %d, ", w, s.Visits[w], l.PerWorker)
		} else {
			out += fmt.Sprintf("%s %d, ", w, s.Visits[w])
		}
	}
	if l.Global == NoLimit {
		return out + fmt.Sprintf("global %d, unlimited", s.Failovers)
	}
	return out + fmt.Sprintf("global %d of %d", s.Failovers, l.Global)
}
