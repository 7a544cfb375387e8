// Package testpause is the pause the test builds' hooks (runtime/worker and
// temporal/dispatch, -tags pipec_testhook) hold a worker in, so a test can
// stop the worker (SIGSTOP) at an exact point of a visit. Only those hooks
// call it.
package testpause

import (
	"os"
	"time"
)

// Wait creates "paused" in the working folder and returns once the test
// created "resume" there.
func Wait() {
	_ = os.WriteFile("paused", nil, 0o644)
	for {
		if _, err := os.Stat("resume"); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
