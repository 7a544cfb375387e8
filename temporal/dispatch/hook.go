//go:build !pipec_testhook

package dispatch

import (
	"context"

	"github.com/pipec/pipec/runtime/exec"
)

// testIdentity is this machine as the worker records it: the real one, in
// every build but the tests' own (hook_testhook.go).
func testIdentity(self exec.Identity) exec.Identity { return self }

// testContinueAfter is RunInput.ContinueAfter for a submitted run: 0 (as
// Temporal suggests) in every build but the tests' own.
func testContinueAfter() int { return 0 }

// testPauseBeforeVisit waits, in the tests' build, before a visit of the
// task the test names; in every other build it returns at once.
func testPauseBeforeVisit(string) {}

// testAfterExit is the runtime's hook as a task's process exited
// (runtime.Options.AfterExit): none but in the tests' build.
func testAfterExit() func(ctx context.Context, task string) { return nil }
