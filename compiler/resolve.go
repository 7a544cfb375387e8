package compiler

import "github.com/pipec/pipec/spec"

// ResolveRetry returns a policy with the documented defaults applied, as the
// plan carries it. The language server shows it on hover, also for a policy
// no task uses yet (which the plan does not carry).
func ResolveRetry(r *spec.RetryPolicy) *PlanRetry { return resolveRetry(r) }
