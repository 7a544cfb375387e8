// Package backend opens a state wherever it lives: the one place that knows
// every store implementation. runtime/store holds the contract and cannot
// import its implementations (they import it); this package may, so callers
// (cli, webview) open a store.Location here and never ask which backend they
// got.
//
// Adding a backend is one package implementing store.Store and queue.Queue
// (runtime/store/sqlite and runtime/store/postgres are the two), one line
// in Open, and one call of the conformance suite (runtime/store/storetest)
// in that package's tests.
package backend

import (
	"context"
	"time"

	"github.com/pipec/pipec/runtime/clock"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/postgres"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

// Handle is an open state: the runtime's store and the workers' queue on
// it, one handle for both. Optional capabilities (queue.AttemptStarter,
// store.EventTailer) are found on it by a type assertion.
type Handle interface {
	store.Store
	queue.Queue
}

var (
	_ Handle = (*sqlite.Store)(nil)
	_ Handle = (*postgres.Store)(nil)
)

// Options tune Open; the zero value is the production setting.
type Options struct {
	// Clock replaces the store's clock, for tests only; nil means the
	// backend's own (the machine's for an SQLite file, the server's for
	// PostgreSQL).
	Clock store.Clock
	// LeaseClock judges leases on a backend that reads the machine's lease
	// clock (an SQLite file: see sqlite.Options.LeaseClock); nil means
	// clock.Boottime. Tests that drive leases by hand pass clock.Wall of
	// their fake clock.
	LeaseClock clock.Lease
	// WaitForServer is how long a write waits for a state server that
	// refuses connections (a restart) before it fails (see
	// postgres.Options.WaitForServer); 0: not at all.
	WaitForServer time.Duration
}

// Open opens (creating if needed) the state at l with the backend l names.
func Open(ctx context.Context, l store.Location, opt Options) (Handle, error) {
	switch {
	case l.Server:
		return handle(postgres.Open(ctx, l.Value, postgres.Options{Clock: opt.Clock, WaitForServer: opt.WaitForServer}))
	default:
		return handle(sqlite.Open(ctx, l.Path, sqlite.Options{Clock: opt.Clock, LeaseClock: opt.LeaseClock}))
	}
}

// handle returns an opened store as a Handle, and a nil Handle (not a nil
// pointer in one) on an error.
func handle[S Handle](s S, err error) (Handle, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}

// CheckShared refuses a state that workers cannot share where it is: an
// SQLite file on a network filesystem (sqlite.CheckLocal). It looks at an
// SQLite file's folder, which exists once the state was opened.
func CheckShared(l store.Location) error {
	if l.Server {
		return nil
	}
	return sqlite.CheckLocal(l.Path)
}
