//go:build !linux

package clock

import "time"

// Boottime is the wall clock where CLOCK_BOOTTIME does not exist.
func Boottime() Reading { return Wall(time.Now)() }
