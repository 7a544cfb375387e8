package dispatch_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// pipec simulate and pipec on Temporal tell the same story. Each of the
// seed's failover cases (docs/design.md section 6) is played twice: by
// pipec simulate, which steps the failover model alone, and by real
// workers w1 and w2 on Temporal (w3 joining a waiting run). What must be
// equal is compared: how many starts, how many on each worker, how many
// failovers, how the story ends (stopped and why, waiting and for what,
// succeeded) and on which worker. The order of the starts is not: Temporal
// gives a task's first start to whichever worker polls first, so the
// real story may begin on w2 where the simulation begins on w1; the real
// workers are named in the order they first started (the first is the
// simulation's w1), which makes the counts comparable.
//
// The seed's first case (retries without limit on one worker) is lint's
// and simulate's alone: unbounded-retry is an error, so pipec submit
// refuses the spec and no run can tell that story.
//
// The workers register with a lease of 10 s: the failover model reasons
// over the live workers, and a worker whose registration lapsed for a
// moment is, rightly, no candidate, which simulate does not play. With the
// 1 s lease of the other tests, at a load of 20 on 2 cores, global = 2 went
// w2 w2 w1 twice (two failovers counted, the second start on w2 again),
// most likely so.

// seedSpec is the seed's task that ends in a run error (fails.sh decides
// which starts), with a retry policy of attempts attempts a visit and
// failover per_worker = 2, global = global, as cli's simulate script
// writes the cases.
func seedSpec(attempts, global int) string {
	return fmt.Sprintf(`
pipeline "seed" {
  code_version = "1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  retry "pipeline" {
    max_attempts = %d
    initial      = "50ms"
    jitter       = "none"
    on           = ["run_error"]
  }
  error "run_error" {
    exit_codes = [1]
  }
  task "extract" {
    command = ["./fails.sh"]
    retry   = "pipeline"
    timeout = "20m"
    # pipec:ignore failover-limits the worked cases on purpose
    failover {
      per_worker = 2
      global     = %d
    }
  }
}
`, attempts, global)
}

// failsAlways fails every start; failsOnce the first only (the file
// failed-once remembers it).
var (
	failsAlways = map[string]string{"fails.sh": "#!/bin/sh\necho \"run error on $PIPEC_WORKER\" >&2\nexit 1\n"}
	failsOnce   = map[string]string{"fails.sh": "#!/bin/sh\nif [ -e failed-once ]; then exit 0; fi\ntouch failed-once\nexit 1\n"}
)

// longLease is the workers' registration lease here (see above).
var longLease = []string{"--lease", "10s"}

// story is how a task's starts went, as both tellers can say it.
type story struct {
	Starts    int
	PerWorker map[string]int
	Failovers int
	// End is "stopped", "waiting" or "succeeded"; Why says why it
	// stopped ("another failover would exceed global = 3") or what it
	// waits for ("waiting for a worker: global count 3 of 4"); Last is the
	// worker of the last start.
	End, Why, Last string
}

// tell builds a story from the workers of the starts in order (renamed
// w1, w2, ... in the order they first started) and its end.
func tell(starts []string, end, why string) story {
	names := map[string]string{}
	s := story{Starts: len(starts), PerWorker: map[string]int{}, End: end, Why: why}
	for i, w := range starts {
		if names[w] == "" {
			names[w] = "w" + strconv.Itoa(len(names)+1)
		}
		s.PerWorker[names[w]]++
		if i > 0 && starts[i-1] != w {
			s.Failovers++
		}
		s.Last = names[w]
	}
	return s
}

var (
	simStart   = regexp.MustCompile(`^start \d+: extract on (w\d+) \(`)
	simStopped = regexp.MustCompile(`^stopped \(failed\): extract failed on w\d+ after \d+ start\(s\); (.*)$`)
	simDone    = regexp.MustCompile(`^succeeded on w\d+ after \d+ start\(s\), (\d+) failover\(s\)$`)
)

// simulate runs pipec simulate on the env's spec and reads its story.
func (e *env) simulate(args ...string) story {
	e.t.Helper()
	code, out := e.run(pipecBin, append([]string{"simulate", "pipeline.hcl", "--workers", "2"}, args...)...)
	if code != 0 {
		e.t.Fatalf("pipec simulate: exit %d\n%s", code, out)
	}
	var starts []string
	end, why, failovers := "", "", -1
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if m := simStart.FindStringSubmatch(l); m != nil {
			starts = append(starts, m[1])
		} else if m := simStopped.FindStringSubmatch(l); m != nil {
			end, why = "stopped", m[1]
		} else if m := simDone.FindStringSubmatch(l); m != nil {
			end = "succeeded"
			failovers, _ = strconv.Atoi(m[1])
		} else if strings.HasPrefix(l, "waiting for a worker") {
			end, why = "waiting", l
		}
	}
	s := tell(starts, end, why)
	if end == "" || (failovers >= 0 && failovers != s.Failovers) {
		e.t.Fatalf("pipec simulate told a story the test cannot read:\n%s", out)
	}
	e.t.Logf("pipec simulate %s:\n%s", strings.Join(args, " "), out)
	return s
}

// real reads the story of the run's task extract from the state: its
// attempts' workers, the failover model's events (work.failover,
// work.stopped) and, while it runs, what pipec status says it waits for.
// It checks the workflow's own record of the task against the state's.
func (e *env) real(run string) story {
	e.t.Helper()
	starts := e.starts(run, "extract")
	r, err := e.st.GetRun(e.t.Context(), run)
	if err != nil {
		e.t.Fatal(err)
	}
	evs, err := e.st.Events(e.t.Context(), run)
	if err != nil {
		e.t.Fatal(err)
	}
	failovers, stopped := 0, ""
	for _, ev := range evs {
		var p struct{ Reason string }
		_ = json.Unmarshal(ev.Payload, &p)
		switch ev.Kind {
		case queue.EventWorkFailover:
			failovers++
		case queue.EventWorkStopped:
			stopped = p.Reason
		}
	}
	wf := taskOf(e.status("seed", "2024-01-01"), "extract")
	var s story
	switch r.State {
	case store.RunFailed:
		// The state's work.stopped says why, as the workflow's task does;
		// the simulation's why is the part both share.
		if stopped == "" || !strings.Contains(wf.Reason, stopped) {
			e.t.Fatalf("stopped: the state says %q, the workflow %q", stopped, wf.Reason)
		}
		s = tell(starts, "stopped", stopped)
	case store.RunSucceeded:
		s = tell(starts, "succeeded", "")
	case store.RunRunning:
		waiting := strings.TrimPrefix(e.statusJSON(run).Waiting, "task extract: ")
		s = tell(starts, "waiting", waiting)
	default:
		e.t.Fatalf("run %s is %s", run, r.State)
	}
	// Every failed start that moves the task is a work.failover in the
	// state; the model counts the move when it starts, so a waiting run
	// has one more in the log than it counts.
	moves := s.Failovers
	if s.End == "waiting" {
		moves++
	}
	if failovers != moves || wf.Failover.Failovers != s.Failovers {
		e.t.Fatalf("the starts %v make %d failover(s); the state recorded %d work.failover, the workflow counts %d",
			starts, s.Failovers, failovers, wf.Failover.Failovers)
	}
	e.t.Logf("on Temporal: starts %v, run %s, %+v", starts, r.State, s)
	return s
}

// same compares the stories, the simulation's why being a part of the
// real one (the state says more: "extract failed on w2: ...; another
// failover would exceed global = 3").
func same(t *testing.T, sim, real story) {
	t.Helper()
	ok := sim.Starts == real.Starts && maps.Equal(sim.PerWorker, real.PerWorker) && sim.Failovers == real.Failovers &&
		sim.End == real.End && sim.Last == real.Last && strings.Contains(real.Why, sim.Why)
	if sim.End == "waiting" {
		ok = ok && real.Why == sim.Why
	}
	if !ok {
		t.Fatalf("pipec simulate and Temporal tell different stories:\nsimulate: %+v\nTemporal: %+v", sim, real)
	}
}

// The stopped and succeeded cases: the run ends by itself.
func TestSimulateAndTemporalAgree(t *testing.T) {
	for _, c := range []struct {
		name             string
		attempts, global int
		files            map[string]string
		args             []string
	}{
		{"global3", 1, 3, failsAlways, nil},                           // w1 w2 w1 w2, stopped
		{"global2", 1, 2, failsAlways, nil},                           // w1 w2 w1, stopped
		{"retries2", 2, 2, failsAlways, nil},                          // two attempts a visit: w1 w1 w2 w2 w1 w1, stopped
		{"once", 1, 3, failsOnce, []string{"--fail", "extract:once"}}, // w1 w2, succeeded
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, seedSpec(c.attempts, c.global), c.files)
			sim := e.simulate(c.args...)
			e.worker("w1", longLease...)
			e.worker("w2", longLease...)
			_, run, _ := e.submit("2024-01-01", true)
			same(t, sim, e.real(run))
		})
	}
}

// global = 4: both tellers stop at w1 w2 w1 w2 waiting for a worker
// (global count 3 of 4), the real run visibly (pipec status); a third
// worker joins and both end the same way on it.
func TestSimulateAndTemporalAgreeWaitingThenJoined(t *testing.T) {
	e := newEnv(t, seedSpec(1, 4), failsAlways)
	waiting, joined := e.simulate(), e.simulate("--join", "1")
	e.worker("w1", longLease...)
	e.worker("w2", longLease...)
	_, run, _ := e.submit("2024-01-01", false)
	for deadline := time.Now().Add(2 * time.Minute); e.statusJSON(run).Waiting == ""; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the run never waited for a worker")
		}
	}
	same(t, waiting, e.real(run))
	e.worker("w3", longLease...)
	e.until(run)
	same(t, joined, e.real(run))
}
