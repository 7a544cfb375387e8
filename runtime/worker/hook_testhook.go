//go:build pipec_testhook

package worker

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/pipec/pipec/internal/testpause"
	"github.com/pipec/pipec/runtime/exec"
)

// hook kills this worker with SIGKILL at a point of a visit, for tests
// that must kill a real worker exactly there: PIPEC_TEST_HOOK=POINT:TASK
// (hookBeforeVisit, hookBeforeFinish, hookAfterFinish or hookAfterExit, and
// the task's name);
// PIPEC_TEST_HOOK=POINT:TASK:term stops it gracefully there instead
// (SIGTERM; the visit goes on once the worker has taken the stop, or at
// hookAfterExit once the stop reached the visit, as if the signal had come
// at that point and not a moment later);
// PIPEC_TEST_HOOK=POINT:TASK:pause holds it there until the test resumes
// it. Only a binary
// built with -tags pipec_testhook has it; see hook.go.
func (c *Config) hook(point, task string) { c.hookUntil(point, task, c.stop) }

// afterExit is hookAfterExit, the runtime's (runtime.Options.AfterExit).
func (c *Config) afterExit() func(ctx context.Context, task string) {
	return func(ctx context.Context, task string) { c.hookUntil(hookAfterExit, task, ctx.Done()) }
}

// hookUntil is hook, whose stop (term) goes on once stopped is closed.
func (c *Config) hookUntil(point, task string, stopped <-chan struct{}) {
	switch os.Getenv("PIPEC_TEST_HOOK") {
	case point + ":" + task:
		c.logf("test hook %s:%s: killing this worker", point, task)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	case point + ":" + task + ":pause":
		// Held until the test resumes it (testpause), so the test can
		// stop the worker at this point.
		c.logf("test hook %s:%s: pausing", point, task)
		testpause.Wait()
	case point + ":" + task + ":term":
		c.logf("test hook %s:%s: stopping this worker", point, task)
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		select {
		case <-stopped:
		case <-time.After(time.Minute):
			c.logf("test hook %s:%s: the stop did not arrive", point, task)
		}
	}
}

// testIdentity records this worker's attempts as another machine's when
// PIPEC_TEST_HOST is set, so a test on one machine can have a worker whose
// processes no other worker may end (as on a real second machine): the
// torn-partition case, where a paused worker's task outlives its claim.
func (c *Config) testIdentity(self exec.Identity) exec.Identity {
	if h := os.Getenv("PIPEC_TEST_HOST"); h != "" {
		self.Host = h
	}
	return self
}
