package store

import "time"

// Collection is pipec gc's hold on a state's artifact versions
// (Store.HoldCollection): while one is live, a run puts no output into an
// artifact store, so gc never removes a version a run has just found there
// and is about to accept (docs/runtime.md, "pipec gc beside running runs").
//
// The hold and the runs keep out of each other's way as two flags do: gc
// records its hold, then reads whether any run is running; a run is
// recorded running before it reads whether a hold is live. Whichever reads
// second sees the other: a gc that sees a running run removes no version,
// and a run that sees a live hold waits for it to end. A hold that is not
// renewed (its gc was killed, or stopped) expires after its lease, and its
// gc removes nothing more once it could not renew in time.
type Collection struct {
	// Holder names who holds it, for messages: "pipec gc on HOST (pid N)".
	Holder string
	// Expiry is when it ends unless renewed, on the store's clock.
	Expiry time.Time
}
