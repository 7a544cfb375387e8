package objstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// AwayWait bounds how long a request waits for an object store that is
// away: one that refuses connections (it is restarting) or answers 503
// (unavailable, or slow down). The request is sent again, at first after
// awayPollMin, then at most every awayPollMax, until it gets through or the
// server has been away that long. It is as long as a run waits for a
// state server that restarts (runtime.DefaultRecordWithin): a restart of
// the object store under a run, or a short outage, fails no task; a longer
// one fails the request as before, and a worker's task fails over.
const AwayWait = 30 * time.Second

// WaitingForServer returns ctx carrying how long requests made with it
// wait for a server that is away, in place of AwayWait (0: not at all).
func WaitingForServer(ctx context.Context, wait time.Duration) context.Context {
	return context.WithValue(ctx, awayWaitKey{}, wait)
}

type awayWaitKey struct{}

const (
	awayPollMin = 50 * time.Millisecond
	awayPollMax = time.Second
)

// awaitServer runs call until it returns nil or an error that does not say
// the server is away (serverAway), or the server has been away for
// AwayWait (or the wait ctx carries, WaitingForServer), or ctx ends. call
// must send its request again in full each time (a body read from its
// start).
func (c *Client) awaitServer(ctx context.Context, call func() error) error {
	wait := AwayWait
	if w, ok := ctx.Value(awayWaitKey{}).(time.Duration); ok {
		wait = w
	}
	var since time.Time
	pause := awayPollMin
	for {
		err := call()
		if err == nil || !serverAway(err) || wait <= 0 {
			return err
		}
		if since.IsZero() {
			since = time.Now()
		}
		if time.Since(since) >= wait {
			return &awayError{err: err, waited: wait}
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(2*pause, awayPollMax)
	}
}

// serverAway reports an error after which the request may succeed if sent
// again: its last try could not connect (nothing of that try was sent), or
// the server answered 503 (it did not act on it). A connection that broke
// after the request was sent is not one: whether the server acted on it is
// unknown. An earlier of the SDK's own tries may have been so, as with
// any of its retries: a conditional write sent again after it was carried
// out is refused, and its caller judges the refusal by reading again (a
// sink's pointer, a version's marker). An endpoint whose name does not
// resolve is not away either.
func serverAway(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	if errors.As(err, &op) && op.Op == "dial" {
		// A name that does not resolve is a mistyped endpoint, not a
		// restart: said at once.
		return !errors.As(err, &dns) || !dns.IsNotFound
	}
	var re interface{ HTTPStatusCode() int }
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusServiceUnavailable
}

// awayError is a request given up after the server was away for waited.
type awayError struct {
	err    error
	waited time.Duration
}

func (e *awayError) Error() string {
	return fmt.Sprintf("%v (the object store was away for %s)", e.err, e.waited)
}
func (e *awayError) Unwrap() error { return e.err }
