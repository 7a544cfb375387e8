package netdelay

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// sleeper waits for each chunk's time to deliver it. Go's timers cannot:
// an idle Go process waits for its next timer in epoll_pwait, whose
// timeout counts whole milliseconds, so a sleep of 100 µs took about a
// millisecond and a round trip asked of 0.1 to 1 ms took 2.2 to 2.3 ms
// (measured on a 2-core machine). A delivering goroutine keeps an OS
// thread of its own instead, which sleeps in nanosleep with the kernel's
// timer slack (50 µs by default) set to 1 ns.
type sleeper struct{}

// newSleeper locks the calling goroutine to its thread for good: the
// thread, with its timer slack, ends with the goroutine.
func newSleeper() sleeper {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) // best effort: the default slack only delays more
	return sleeper{}
}

// until sleeps until due.
func (sleeper) until(due time.Time) {
	for {
		wait := time.Until(due)
		if wait <= 0 {
			return
		}
		ts := unix.NsecToTimespec(wait.Nanoseconds())
		_ = unix.Nanosleep(&ts, nil) // interrupted by a signal: sleep what is left
	}
}
