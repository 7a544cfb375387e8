//go:build pipec_testhook

package dispatch

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/pipec/pipec/internal/testpause"
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

// testPauseBeforeVisit holds a visit of the task PIPEC_TEST_PAUSE_TASK
// until the test resumes it (testpause), so the test can stop the worker
// at that point of a visit: its activity started, the task's attempts not
// read.
func testPauseBeforeVisit(task string) {
	if task != "" && task == os.Getenv("PIPEC_TEST_PAUSE_TASK") {
		testpause.Wait()
	}
}

// testAfterExit stops this worker (SIGTERM) as the process of the task
// PIPEC_TEST_TERM_AFTER_EXIT has exited, and lets the visit go on once the
// stop reached it (its context ended), as if the signal had come at that
// point and not a moment later.
func testAfterExit() func(ctx context.Context, task string) {
	name := os.Getenv("PIPEC_TEST_TERM_AFTER_EXIT")
	if name == "" {
		return nil
	}
	return func(ctx context.Context, task string) {
		if task != name {
			return
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
		}
	}
}
