package cli

import (
	"cmp"
	"io"
	"slices"
	"strings"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/store"
)

// How status and events order a run's tasks, said in their output.
const (
	// orderPlan: the plan's order (compiler.Plan.Order), upstream first.
	orderPlan = "plan"
	// orderStarted: without the plan, the order the tasks first appear in
	// the run's event log (their first attempt, or their reuse or not
	// run), which follows the plan's for a run it made.
	orderStarted = "started"
)

// taskOrder ranks a run's task names: by the plan's order when plan is the
// run's pipeline's, else by the first event that names them (evs in log
// order), then by name. Tasks the plan does not have (renamed since the
// run) follow the plan's, in the order they started. It returns the order
// used (orderPlan or orderStarted).
func taskOrder(plan *compiler.Plan, pipeline string, evs []store.Event) (func(a, b string) int, string) {
	first := map[string]int{}
	for i, ev := range evs {
		if _, ok := first[ev.Task]; !ok && ev.Task != "" {
			first[ev.Task] = i
		}
	}
	started := func(a, b string) int {
		ia, oka := first[a]
		ib, okb := first[b]
		switch {
		case oka && okb:
			return cmp.Compare(ia, ib)
		case oka != okb:
			// A task no event names goes last.
			if oka {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	}
	if plan == nil || plan.Pipeline != pipeline {
		return started, orderStarted
	}
	rank := planRanks(plan)
	return func(a, b string) int {
		ra, oka := rank[a]
		rb, okb := rank[b]
		switch {
		case oka && okb:
			return cmp.Compare(ra, rb)
		case oka != okb:
			if oka {
				return -1
			}
			return 1
		}
		return started(a, b)
	}, orderPlan
}

// planRanks is each task's place in the plan's order.
func planRanks(plan *compiler.Plan) map[string]int {
	rank := map[string]int{}
	for _, id := range plan.Order {
		if name, ok := strings.CutPrefix(id, compiler.KindTask+"."); ok {
			rank[name] = len(rank)
		}
	}
	return rank
}

// sortTasks sorts names in the plan's order (tasks it lacks last, by name).
func sortTasks(plan *compiler.Plan, names []string) {
	order, _ := taskOrder(plan, plan.Pipeline, nil)
	slices.SortFunc(names, order)
}

// orderNote says, after a listing, which order its tasks are in when it is
// not the plan's ("" when every run's was).
func orderNote(orders []string) string {
	if slices.Contains(orders, orderStarted) {
		return "(tasks in the order they started: give the SPEC for the plan's order)\n"
	}
	return ""
}

// planForOrder is the plan of spec for ordering tasks, or nil when there is
// no spec or it does not compile (status and events still read the state;
// the order is then said to be the started one).
func planForOrder(cio IO, spec string) *compiler.Plan {
	if spec == "" {
		return nil
	}
	cio.Stdout, cio.Stderr = io.Discard, io.Discard
	plan, err := loadPlan(cio, spec)
	if err != nil {
		return nil
	}
	return plan
}
