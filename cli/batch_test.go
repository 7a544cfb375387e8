package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/schedule"
)

// slotStore stands for the state's run slots in the batch tests: capacity
// slots, held of them by another process; a launch takes one or is
// refused (noSlot), and its run ends when the test closes its release
// channel.
type slotStore struct {
	mu                       sync.Mutex
	capacity, held, active   int
	tries, refusals, topMine int
	release                  map[string]chan struct{}
	refused                  map[string]bool
}

func (s *slotStore) launch(ctx context.Context, iv runtime.Interval, started func(string)) outcome {
	s.mu.Lock()
	s.tries++
	if s.held+s.active >= s.capacity {
		s.refusals++
		s.refused[iv.Key] = true
		why := fmt.Sprintf("%d of %d runs of p are in progress (max_active_runs): …", s.held+s.active, s.capacity)
		s.mu.Unlock()
		return outcome{state: noSlot, why: why}
	}
	s.active++
	s.topMine = max(s.topMine, s.active)
	rel := s.release[iv.Key]
	s.mu.Unlock()
	run := "p/" + iv.Key + "/r1"
	started(run)
	<-rel
	s.mu.Lock()
	s.active--
	s.mu.Unlock()
	return outcome{run: run, state: "succeeded"}
}

func slotDecisions(t *testing.T, days ...int) ([]schedule.Decision, map[string]chan struct{}) {
	t.Helper()
	sched := &compiler.PlanSchedule{Every: "24h", Start: "2024-01-01T00:00:00Z"}
	var ds []schedule.Decision
	rel := map[string]chan struct{}{}
	for _, d := range days {
		iv, err := runtime.ResolveInterval(sched, fmt.Sprintf("2024-01-%02d", d))
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, schedule.Decision{Interval: iv, Action: schedule.Run})
		rel[iv.Key] = make(chan struct{})
	}
	return ds, rel
}

// TestBatchTriesAgainWhenItsRunEnds: another process holds one of two run
// slots, so the batch (2 slots of its own) gets one; each interval refused
// meanwhile is tried again when the batch's run ends, and all three run,
// one at a time.
func TestBatchTriesAgainWhenItsRunEnds(t *testing.T) {
	ds, rel := slotDecisions(t, 1, 2, 3)
	s := &slotStore{capacity: 2, held: 1, release: rel, refused: map[string]bool{}}
	var out bytes.Buffer
	b := &batch{io: IO{Stdout: &syncWriter{w: &out}}, slots: 2, launch: s.launch, later: "later"}
	done := make(chan batchResult, 1)
	go func() { done <- b.run(context.Background(), ds) }()
	for k, d := range ds {
		// Let each run end once the next interval was refused (so the
		// retry is what starts it), the last at once.
		if k+1 < len(ds) {
			s.waitRefused(ds[k+1].Interval.Key)
		}
		close(rel[d.Interval.Key])
	}
	res := <-done
	if res.succeeded != 3 || res.noSlot != 0 || res.failed != 0 {
		t.Fatalf("result %+v, want 3 succeeded\n%s", res, out.String())
	}
	if s.topMine != 1 {
		t.Errorf("the batch ran %d at once beside the other process's run; 1 slot was free", s.topMine)
	}
	if s.refusals < 2 {
		t.Errorf("%d refusals, want at least one for each of 2024-01-02 and 2024-01-03", s.refusals)
	}
	if strings.Contains(out.String(), "no free run slot") {
		t.Errorf("an interval was left though the batch's own run held the slot:\n%s", out.String())
	}
}

// waitRefused waits until the store refused a launch of interval key,
// polling: the test asserts on outcomes, never on how long this takes.
func (s *slotStore) waitRefused(key string) {
	for {
		s.mu.Lock()
		done := s.refused[key]
		s.mu.Unlock()
		if done {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBatchLeavesIntervalsWithoutASlot: the only slot is another
// process's, and none of the batch's runs is going: the batch runs
// nothing and leaves every interval, on two lines, for later.
func TestBatchLeavesIntervalsWithoutASlot(t *testing.T) {
	ds, rel := slotDecisions(t, 1, 2, 3)
	s := &slotStore{capacity: 1, held: 1, release: rel, refused: map[string]bool{}}
	var out bytes.Buffer
	b := &batch{io: IO{Stdout: &out}, slots: 1, launch: s.launch, later: "the next --due starts it"}
	res := b.run(context.Background(), ds)
	if res.noSlot != 3 || res.succeeded != 0 || s.tries != 1 {
		t.Fatalf("result %+v after %d tries, want 3 left after 1 try\n%s", res, s.tries, out.String())
	}
	want := "interval 1 of 3 (2024-01-01), 0 succeeded, 0 failed\n" +
		"2024-01-01  skipped: no free run slot: 1 of 1 runs of p are in progress (max_active_runs): …; the next --due starts it\n" +
		"2024-01-02 to 2024-01-03 (2)  skipped: no free run slot\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	if line := res.summaryLine("due", 0, 0, 0); line != "due: 0 of 3 run(s) succeeded; 3 left for want of a run slot" {
		t.Errorf("summary %q", line)
	}
}

// syncWriter serializes writes from the batch's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
