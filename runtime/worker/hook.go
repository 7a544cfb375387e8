//go:build !pipec_testhook

package worker

import (
	"context"

	"github.com/pipec/pipec/runtime/exec"
)

// hook is a test's hook at a point of a visit (hook_testhook.go); in every
// build but the tests' own (go build -tags pipec_testhook) it does nothing,
// so no environment of a production worker can reach it.
func (c *Config) hook(point, task string) {}

// afterExit is the runtime's hook as a task's process exited: none.
func (c *Config) afterExit() func(ctx context.Context, task string) { return nil }

// testIdentity is this machine as the worker records it: the real one, in
// every build but the tests' own (hook_testhook.go).
func (c *Config) testIdentity(self exec.Identity) exec.Identity { return self }
