package store

import (
	"context"
	"time"
)

// serverWaitKey is the context key of WaitingForServer.
type serverWaitKey struct{}

// WaitingForServer returns ctx carrying how long a store's calls made with
// it wait for a state server that refuses connections (a restart, crash
// recovery) before they fail with ErrUnreachable, in place of the wait the
// store was opened with. A worker's own calls fail at once (its loop rides
// outages and says so), but the calls of a visit wait as a local run's do:
// a visit that gave up at once failed its task for a blip of its state.
// Nothing is sent on a refused connection, so any call may wait. Stores
// without a server ignore it.
func WaitingForServer(ctx context.Context, wait time.Duration) context.Context {
	return context.WithValue(ctx, serverWaitKey{}, wait)
}

// ServerWait is the wait WaitingForServer put on ctx, or def.
func ServerWait(ctx context.Context, def time.Duration) time.Duration {
	if w, ok := ctx.Value(serverWaitKey{}).(time.Duration); ok {
		return w
	}
	return def
}
