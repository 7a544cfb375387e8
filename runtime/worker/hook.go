//go:build !pipec_testhook

package worker

// hook is a test's hook at a point of a visit (hook_testhook.go); in every
// build but the tests' own (go build -tags pipec_testhook) it does nothing,
// so no environment of a production worker can reach it.
func (c *Config) hook(point, task string) {}
