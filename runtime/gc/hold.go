package gc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/pipec/pipec/runtime/store"
)

// Holding the artifact versions (store.Collection): gc records its hold
// before it reads the state, and renews it while it removes versions; a run
// puts no output into an artifact store while a hold is live. A version a
// run found in the store already (a digest met before) is thus never
// removed under it: either gc read the run as running and removes no
// version, or the run waits for gc to end.

// Hold timings: the lease the store keeps the hold for, how often it is
// renewed, and how long before the lease would end gc stops removing:
// a removal must begin well inside the lease, and not outlast it.
const (
	holdLease  = 30 * time.Second
	holdRenew  = 5 * time.Second
	holdMargin = 10 * time.Second
)

// hold is gc's hold on the artifact versions while it runs.
type hold struct {
	st     store.Store
	holder string
	lease  time.Duration
	margin time.Duration
	stop   chan struct{}
	done   chan struct{}

	mu sync.Mutex
	// until is when removals must have ended, on this process's monotonic
	// clock: the last renewal's start, plus the lease, less the margin. It
	// never moves once passed: a gc stopped (SIGSTOP) past it may find
	// that a run went on meanwhile, and renewing then would not undo that.
	until  time.Time
	lapsed error
}

// errHoldLapsed says that gc stopped removing versions because its hold on
// them lapsed; errLapse says it to a person.
var (
	errHoldLapsed = errors.New("its hold on the artifact versions lapsed")
	errLapse      = fmt.Errorf("%w: it was not renewed in time (gc was stopped, or the state did not answer), and a run may have put outputs meanwhile: run pipec gc again", errHoldLapsed)
)

// takeHold records gc's hold on the artifact versions and keeps renewing it
// every renew until release.
func takeHold(ctx context.Context, st store.Store, lease, renew, margin time.Duration) (*hold, error) {
	host, _ := os.Hostname()
	h := &hold{st: st, holder: fmt.Sprintf("pipec gc on %s (pid %d)", host, os.Getpid()), lease: lease, margin: margin,
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := h.renew(ctx); err != nil {
		return nil, err
	}
	go h.keep(ctx, renew)
	return h, nil
}

// renew extends the hold, unless it lapsed: then the error says so, for
// good.
func (h *hold) renew(ctx context.Context) error {
	start := time.Now()
	h.mu.Lock()
	lapsed := h.lapsedAt(start)
	h.mu.Unlock()
	if lapsed != nil {
		return lapsed
	}
	if err := h.st.HoldCollection(ctx, h.holder, h.lease); err != nil {
		return err
	}
	h.mu.Lock()
	if h.lapsed == nil {
		h.until = start.Add(h.lease - h.margin)
	}
	h.mu.Unlock()
	return nil
}

// keep renews the hold every renew until release; a renewal that fails
// leaves until where it was, and removals stop when it passes.
func (h *hold) keep(ctx context.Context, renew time.Duration) {
	defer close(h.done)
	t := time.NewTicker(renew)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			_ = h.renew(ctx)
		}
	}
}

// removing returns the context a removal runs under, which ends when the
// hold may lapse, or the error that says removals must stop.
func (h *hold) removing(ctx context.Context) (context.Context, context.CancelFunc, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.lapsedAt(time.Now()); err != nil {
		return nil, nil, err
	}
	rctx, cancel := context.WithDeadline(ctx, h.until)
	return rctx, cancel, nil
}

// lapsedAt says, h.mu held, whether the hold lapsed by now: once it has,
// for good.
func (h *hold) lapsedAt(now time.Time) error {
	if h.lapsed == nil && !h.until.IsZero() && !now.Before(h.until) {
		h.lapsed = errLapse
	}
	return h.lapsed
}

// release stops the renewals and ends the hold, whether or not ctx ended
// (an interrupted gc still lets the runs go on at once).
func (h *hold) release(ctx context.Context) error {
	close(h.stop)
	<-h.done
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return h.st.EndCollection(rctx, h.holder)
}
