package runtime

import (
	"context"
	"errors"
	"fmt"
)

// Visit is one task's turn on one worker, for pipec worker: the worker has
// claimed the task of a run recorded by pipec submit and runs it here
// exactly as a local run runs a task (inputs resolved in the store, staged,
// audited, published with its token), retrying on this worker as the retry
// policy says. Where a visit differs from a local run's task:
//
//   - the run exists already (Run); the visit neither creates nor finishes
//     it, and takes no lease on the interval (the workers share the run);
//   - the retry policy counts this visit's attempts only (AttemptBase is how
//     many the task made before, on any worker), as the failover model does;
//   - an attempt whose lease expired is not relaunched here: this worker was
//     unreachable (stopped, partitioned) and another worker takes the task
//     over, so the process is stopped and the visit ends with LeaseLost.
type Visit struct {
	Options
	// Run is the run's id; Task the task to run.
	Run  string
	Task string
	// AttemptBase is how many attempts the task made in the run before
	// this visit.
	AttemptBase int
}

// VisitResult is how a visit ended.
type VisitResult struct {
	// Task is the task's result (succeeded, failed, not run), as in a run's
	// summary.
	Task TaskResult
	// LeaseLost: an attempt's lease expired during the visit; the outcome
	// belongs to whichever worker took the task over.
	LeaseLost bool
	// Deterministic: the last failure is of a deterministic class (it would
	// fail the same anywhere: no failover).
	Deterministic bool
}

// RunVisit runs one visit. The error is for a visit that could not be
// carried out at all (unknown task, bad interval); task failures are in the
// result.
func RunVisit(ctx context.Context, v Visit) (VisitResult, error) {
	o := v.Options
	if o.Plan == nil || o.Store == nil || v.Run == "" {
		return VisitResult{}, errors.New("runtime: a visit needs a plan, a store and a run")
	}
	iv, err := ResolveInterval(o.Plan.Schedule, o.Interval)
	if err != nil {
		return VisitResult{}, err
	}
	r, err := newRunner(o, iv)
	if err != nil {
		return VisitResult{}, err
	}
	ts := r.tasks[v.Task]
	if ts == nil {
		return VisitResult{}, fmt.Errorf("runtime: the plan has no task %q", v.Task)
	}
	r.runID, r.runCtx = v.Run, ctx
	if why := needsSharedArtifacts(o.Plan, ts.t); r.artsLocal && why != "" {
		// A clear refusal rather than versions kept on this worker's disk,
		// where another worker would look for them in vain.
		r.taskFailed(ctx, ts, "", 0, "", "no shared artifact store: "+why+"; set artifacts in the spec or give the "+
			"workers --artifacts DIR, a folder they all mount")
		return VisitResult{Task: ts.res, Deterministic: true}, nil
	}
	r.visitBase, r.stopOnLeaseLoss = v.AttemptBase, true
	r.leases = newLeaseWatch(r)
	leaseCtx, stopLeases := context.WithCancel(ctx)
	leaseDone := make(chan struct{})
	go func() { r.leases.loop(leaseCtx); close(leaseDone) }()
	r.mu.Lock()
	ts.state = taskRunning
	r.mu.Unlock()
	r.runTask(ctx, ts)
	r.drainZombies()
	stopLeases()
	<-leaseDone
	r.mu.Lock()
	defer r.mu.Unlock()
	res := VisitResult{Task: ts.res, LeaseLost: r.leaseLost.Load()}
	res.Deterministic = r.classes.Deterministic(ts.res.Class)
	return res, nil
}
