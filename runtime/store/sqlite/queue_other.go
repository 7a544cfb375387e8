//go:build !linux

package sqlite

// CheckLocal cannot tell a network filesystem here; it accepts every path
// (docs/workers.md: a shared SQLite file is for workers on one machine).
func CheckLocal(path string) error { return nil }
