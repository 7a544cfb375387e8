package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/pgtest"
	"github.com/pipec/pipec/internal/proctest"
	"github.com/pipec/pipec/internal/spectest"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/postgres"
)

// A run stopped (Ctrl-C) while its PostgreSQL state does not answer (the
// server frozen with SIGSTOP, its connections open) returns once the kill
// grace and RecordWithin passed, saying that what it stopped is not
// recorded; it waited for the state for ever before. The next run, the
// server back, settles the stopped attempt as unknown and charges nobody
// twice.
func TestStoppedRunOnASilentState(t *testing.T) {
	srv := pgtest.Start(t) // its own server: this test freezes it
	url := srv.NewSchema(t)
	st, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f := newFixture(t, chargeHCL, map[string]string{"charge.sh": `echo charge >> ledger; touch started; exec sleep 60`})
	o := f.options("2024-01-01")
	o.Store, o.ServerState, o.RecordWithin = st, "postgres", time.Second
	// The run's lease outlives the stopped run in this process (a pipec
	// that exited leaves it to a dead pid): short, for the next run.
	o.RunLease = 2 * time.Second

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	type ran struct {
		sum *Summary
		err error
	}
	done := make(chan ran, 1)
	go func() {
		sum, err := Run(ctx, o)
		done <- ran{sum, err}
	}()
	proctest.WaitFile(t, filepath.Join(f.dir, "started"), time.Minute)
	thaw := srv.Frozen(t)
	stop() // Ctrl-C
	var got ran
	select {
	case got = <-done:
	case <-time.After(time.Minute): // the bound is 1.5 s; this only ends a broken test
		thaw()
		t.Fatal("the stopped run still waits for its frozen state")
	}
	thaw()
	if got.sum == nil || !strings.Contains(got.sum.StoreError, "the state did not answer within 1.5s of the stop") {
		t.Fatalf("summary: %+v, %v", got.sum, got.err)
	}
	var silent errStateSilent
	if !errors.As(got.err, &silent) {
		t.Errorf("Run's error %v does not say the state was silent", got.err)
	}

	o.Wait = true
	sum := f.run(o)
	if tr := sum.task("charge"); tr.State != TaskUnknown {
		t.Fatalf("the next run: charge %+v\n%s", tr, sum.text())
	}
	if b, err := os.ReadFile(filepath.Join(f.dir, "ledger")); err != nil || string(b) != "charge\n" {
		t.Fatalf("ledger %q, %v: want one charge", b, err)
	}
}

// A run whose state stops answering (PostgreSQL frozen with SIGSTOP)
// waits for it, and says so through OnStateSilent once its lease's renewal
// has waited a third of the lease, then again once the state answered;
// the run succeeds.
func TestStateSilenceIsSaid(t *testing.T) {
	srv := pgtest.Start(t) // its own server: this test freezes it
	st, err := postgres.Open(t.Context(), srv.NewSchema(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f := newFixture(t, `pipeline "quiet" {
  task "a" {
    command = ["sh", "-c", "touch started; sleep 2"]
  }
}`, nil)
	o := f.options("2024-01-01")
	var mu sync.Mutex
	var told []bool
	o.Store, o.ServerState, o.RunLease = st, "postgres", 300*time.Millisecond
	o.OnStateSilent = func(silent bool, err error) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, silent)
		if err != nil {
			t.Errorf("the renewal failed: %v", err)
		}
	}
	go func() {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(f.dir, "started")); err == nil {
				break
			}
		}
		if err := srv.Freeze(); err != nil {
			t.Error(err)
		}
		time.Sleep(time.Second) // three renewals' worth
		if err := srv.Thaw(); err != nil {
			t.Error(err)
		}
	}()
	if sum := f.run(o); sum.Failed {
		t.Fatalf("run:\n%s", sum.text())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) < 2 || !slices.Equal(told[:2], []bool{true, false}) || len(told)%2 != 0 {
		t.Fatalf("OnStateSilent was told %v, want true then false", told)
	}
}

// acceptLost is a store whose first acceptance of a version finds none, as
// one does once a crash of the state's server took back the version's
// record (an asynchronous commit on PostgreSQL).
type acceptLost struct {
	store.Store
	lost bool
}

func (s *acceptLost) AcceptVersion(ctx context.Context, id int64) error {
	if !s.lost {
		s.lost = true
		return fmt.Errorf("version %d: %w", id, store.ErrNotFound)
	}
	return s.Store.AcceptVersion(ctx, id)
}

// A version whose record the state lost before its acceptance is recorded
// again and accepted: its checks passed on the same bytes, and the run
// publishes it. It was rejected before ("accepting output a0: version 1:
// not found"), and the run failed.
func TestVersionLostBeforeItsAcceptance(t *testing.T) {
	f := newFixture(t, spectest.Chain{Pipeline: "p", N: 1}.HCL(), nil)
	o := f.options("2024-01-01")
	st := &acceptLost{Store: f.st}
	o.Store = st
	sum := f.run(o)
	if sum.Failed || !st.lost || len(sum.Publish) != 1 || sum.Publish[0].Outcome != "won" {
		t.Fatalf("lost %v:\n%s", st.lost, sum.text())
	}
}
