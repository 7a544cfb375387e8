//go:build !linux

package netdelay

import "time"

// sleeper waits for each chunk's time with Go's timers, which outside
// Linux are as fine as the system's (sleep_linux.go says why Linux needs
// more).
type sleeper struct{}

func newSleeper() sleeper { return sleeper{} }

func (sleeper) until(due time.Time) { time.Sleep(time.Until(due)) }
