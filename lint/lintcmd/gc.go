package lintcmd

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// firstCollection is the heap size at which a lint run collects garbage for
// the first time (see collectLate).
const firstCollection = 256 << 20

// collectLate puts off the first garbage collection of a one-shot command
// until the heap reaches firstCollection, then restores the settings main
// chose (GOGC=400 under a soft limit of 768 MiB). Linting a 10,000-task spec
// allocates about 90 MB (HCL) and 200 MB (CUE), most of it live until the
// end: the two collections it made at GOGC=400 found little to free, and
// their marking (with the write barrier on meanwhile) cost a quarter of the
// wall time. A spec big enough to reach firstCollection is collected from
// then on as before, so 100,000 tasks stay under the same limit. GOGC or
// GOMEMLIMIT in the environment leave everything as it is.
func collectLate(getenv func(string) string) {
	if getenv == nil || getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return
	}
	lateOnce.Do(func() {
		percent := debug.SetGCPercent(-1)
		limit := debug.SetMemoryLimit(firstCollection)
		// The mark is unreachable from the start: the first collection
		// finds it and runs its cleanup, which restores the settings.
		runtime.AddCleanup(new(gcMark), func(struct{}) {
			debug.SetGCPercent(percent)
			debug.SetMemoryLimit(limit)
		}, struct{}{})
	})
}

var lateOnce sync.Once

// gcMark is big enough not to share a block with other tiny allocations,
// which would keep it alive past the first collection.
type gcMark struct{ _ [64]byte }
