//go:build pipec_testhook

package worker

import (
	"os"
	"syscall"
)

// hook kills this worker with SIGKILL at a point of a visit, for tests
// that must kill a real worker exactly there: PIPEC_TEST_HOOK=POINT:TASK
// (hookBeforeFinish or hookAfterFinish, and the task's name). Only a binary
// built with -tags pipec_testhook has it; see hook.go.
func (c *Config) hook(point, task string) {
	if os.Getenv("PIPEC_TEST_HOOK") != point+":"+task {
		return
	}
	c.logf("test hook %s:%s: killing this worker", point, task)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
