package runtime

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

// TestWallClockStepsDoNotExpireLeases: the store's wall clock (injected)
// jumps eleven minutes forward, then an hour back, while a healthy task with
// a ten-minute lease runs. Leases are judged on the lease clock
// (CLOCK_BOOTTIME), which did not move that far: the attempt stays running,
// is never marked unknown nor relaunched, and the run's own lease holds.
func TestWallClockStepsDoNotExpireLeases(t *testing.T) {
	f := newFixture(t, `pipeline "steps" {
  retry "relaunch" {
    max_attempts = 2
    initial      = "10ms"
  }
  task "healthy" {
    command = ["sh", "-c", "echo $$ > started.$PIPEC_ATTEMPT; sleep 0.5; touch \"$PIPEC_HEARTBEAT\"; sleep 0.5"]
    retry   = "relaunch"
    heartbeat {
      every = "1m"
      lease = "10m"
    }
  }
}`, nil)
	var skew atomic.Int64
	stepping := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	path := filepath.Join(f.dir, "steps.db")
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{Clock: stepping})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	o := f.options("2024-01-01")
	o.Store, o.StatePath = st, path
	o.LeasePoll = 20 * time.Millisecond
	ev := &events{}
	o.OnEvent = ev.add
	done := runAsync(t, o)
	waitPID(t, filepath.Join(f.dir, "started.1"))
	ref := store.AttemptRef{Run: "steps/2024-01-01/r1", Task: "healthy", Number: 1}
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, err := st.GetAttempt(context.Background(), ref)
		if err == nil && a.State == store.AttemptRunning && a.PID != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("attempt 1 never ran: %+v %v", a, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	skew.Store(int64(11 * time.Minute)) // NTP steps forward
	if got, err := st.MarkUnknown(context.Background()); err != nil || len(got) != 0 {
		t.Fatalf("a forward step expired leases: %+v, %v", got, err)
	}
	time.Sleep(100 * time.Millisecond) // several lease polls of the run
	skew.Store(int64(-time.Hour))      // and back
	sum := <-done
	if sum == nil {
		return
	}
	if tr := sum.task("healthy"); sum.Failed || tr.State != TaskSucceeded || tr.Attempts != 1 {
		t.Fatalf("healthy = %+v\n%s", tr, sum.text())
	}
	for _, k := range ev.kinds("healthy") {
		if k == store.EventAttemptUnknown || k == EventAttemptLease {
			t.Errorf("event %s: a healthy attempt was judged on the stepped clock", k)
		}
	}
}
