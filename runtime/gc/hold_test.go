package gc

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store/sqlite"
)

// TestHoldRenewedThenLapsed: gc's hold on the artifact versions is live in
// the state while it is renewed; once it went unrenewed past its margin
// (a gc stopped, or cut off from the state), removals stop and a renewal
// does not take it back; released, it is gone at once.
func TestHoldRenewedThenLapsed(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	live := func() bool {
		t.Helper()
		_, ok, err := st.Collecting(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	renewed, err := takeHold(ctx, st, 400*time.Millisecond, 50*time.Millisecond, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond) // past the first lease: the renewals kept it
	if _, cancel, err := renewed.removing(ctx); err != nil {
		t.Errorf("a hold renewed every 50 ms: %v", err)
	} else {
		cancel()
	}
	if err := renewed.release(ctx); err != nil {
		t.Fatal(err)
	}
	if live() {
		t.Error("a released hold is still live")
	}

	// Renewed every hour: as a gc stopped right after it took its hold.
	stopped, err := takeHold(ctx, st, 400*time.Millisecond, time.Hour, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer stopped.release(ctx)
	rctx, cancel, err := stopped.removing(ctx)
	if err != nil {
		t.Fatalf("a fresh hold: %v", err)
	}
	if dl, ok := rctx.Deadline(); !ok || time.Until(dl) > 200*time.Millisecond {
		t.Errorf("a removal may run until %v, past the hold's margin", dl)
	}
	cancel()
	if !live() {
		t.Error("the hold is not live in the state")
	}
	time.Sleep(250 * time.Millisecond)
	if _, _, err := stopped.removing(ctx); !errors.Is(err, errHoldLapsed) {
		t.Errorf("removing past the margin: %v, want the hold lapsed", err)
	}
	if err := stopped.renew(ctx); !errors.Is(err, errHoldLapsed) {
		t.Errorf("renewing a lapsed hold: %v, want it refused", err)
	}
	time.Sleep(200 * time.Millisecond)
	if live() {
		t.Error("a lapsed hold was renewed in the state")
	}
	if _, _, err := stopped.removing(ctx); !errors.Is(err, errHoldLapsed) {
		t.Errorf("removing after a refused renewal: %v, want the hold lapsed", err)
	}
}
