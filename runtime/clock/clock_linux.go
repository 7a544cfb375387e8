//go:build linux

package clock

import (
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// bootID is read once: it cannot change while the process lives.
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// Boottime reads CLOCK_BOOTTIME with this boot's id. Where either is
// missing it falls back to Wall.
func Boottime() Reading {
	boot := bootID()
	var ts unix.Timespec
	if boot == "" || unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return Wall(time.Now)()
	}
	return Reading{Boot: boot, Nanos: ts.Nano()}
}
