//go:build pipec_testhook

package dispatch

import (
	"os"
	"strconv"

	"github.com/pipec/pipec/runtime/exec"
)

// testIdentity records this worker's attempts as another machine's when
// PIPEC_TEST_HOST is set (as runtime/worker's test hook does), so a test on
// one machine can have a worker whose processes no other worker may end:
// a paused worker's task outlives its visit, as on a real second machine.
// Only a binary built with -tags pipec_testhook has it.
func testIdentity(self exec.Identity) exec.Identity {
	if h := os.Getenv("PIPEC_TEST_HOST"); h != "" {
		self.Host = h
	}
	return self
}

// testContinueAfter is PIPEC_TEST_CONTINUE_AFTER: a history length past
// which a submitted run continues as new, so a test sees it with a small
// run.
func testContinueAfter() int {
	n, _ := strconv.Atoi(os.Getenv("PIPEC_TEST_CONTINUE_AFTER"))
	return n
}
