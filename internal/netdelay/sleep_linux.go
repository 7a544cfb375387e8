package netdelay

import (
	"time"

	"golang.org/x/sys/unix"
)

// sleepUntil waits for a chunk's time to deliver it. Go's timers cannot:
// a Go process waiting for nothing else waits for its next timer in
// epoll_pwait, whose timeout counts whole milliseconds, so a sleep of 100
// µs took about a millisecond, and a round trip asked of 0.1 to 1 ms took
// 2.2 to 2.3 ms (measured on a 2-core machine). It sleeps in nanosleep
// instead, with the thread's timer slack (50 µs by default) set to 1 ns
// first: the benchmark's process is the proxy's, and finer timers on its
// threads cost it nothing it measures.
func sleepUntil(due time.Time) {
	for {
		wait := time.Until(due)
		if wait <= 0 {
			return
		}
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) // best effort: the default slack only delays more
		ts := unix.NsecToTimespec(wait.Nanoseconds())
		_ = unix.Nanosleep(&ts, nil) // interrupted by a signal: sleep what is left
	}
}
