//go:build !unix

package sqlite

import "time"

// writeLock is a no-op where flock is missing: writers then only poll
// SQLite's own lock, which is slower under contention but as correct.
type writeLock struct{}

func openWriteLock(string) (*writeLock, error) { return &writeLock{}, nil }
func (*writeLock) lock(time.Duration) error    { return nil }
func (*writeLock) unlock()                     {}
func (*writeLock) close() error                { return nil }
