package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// testOneRunPerInterval: a run handed to workers holds no lease on its
// interval, yet it is the interval's run until the workers end it: a second
// submission of the interval, and a local run of it, are refused naming it;
// another interval is not; once it ended, the interval may run again.
func testOneRunPerInterval(t *testing.T, open Opener) {
	h := open(t, nil)(t)
	ctx := context.Background()
	run := submit(t, h, submission("2024-01-01", task("extract", once)))
	_, err := h.Submit(ctx, submission("2024-01-01", task("extract", once)))
	var busy *store.RunBusyError
	if !errors.As(err, &busy) || !errors.Is(err, store.ErrRunBusy) || busy.Run != run || !busy.Submitted ||
		!strings.Contains(err.Error(), "submitted to the workers") {
		t.Fatalf("a second submission of the interval: %v, want a RunBusyError naming %s", err, run)
	}
	local := submission("2024-01-01").Run
	local.Lease, local.Owner = time.Minute, store.RunOwner{Host: "host", PID: 2}
	if _, err := h.CreateRun(ctx, local); !errors.As(err, &busy) || busy.Run != run {
		t.Fatalf("a local run beside the submitted one: %v, want a RunBusyError naming %s", err, run)
	}
	submit(t, h, submission("2024-01-02", task("extract", once)))
	register(t, h, "w1")
	finish(t, h, "w1", mustClaim(t, h, "w1", "extract"), queue.Result{Ending: queue.Succeeded})
	if rs, _ := status(t, h, run); rs.Run.State == store.RunRunning {
		// The other interval's task was claimed first: finish it too.
		finish(t, h, "w1", mustClaim(t, h, "w1", "extract"), queue.Result{Ending: queue.Succeeded})
	}
	if rs, _ := status(t, h, run); rs.Run.State != store.RunSucceeded {
		t.Fatalf("run %s is %s, want succeeded", run, rs.Run.State)
	}
	if again := submit(t, h, submission("2024-01-01", task("extract", once))); again != "orders/2024-01-01/r2" {
		t.Fatalf("the interval submitted again after its run ended: %s", again)
	}
}
