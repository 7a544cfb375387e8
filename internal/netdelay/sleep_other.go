//go:build !linux

package netdelay

import "time"

// sleepUntil waits for a chunk's time with Go's timers, which outside
// Linux are as fine as the system's (sleep_linux.go says why Linux needs
// more).
func sleepUntil(due time.Time) { time.Sleep(time.Until(due)) }
