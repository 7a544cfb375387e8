package failover

import (
	"fmt"
	"slices"
	"strings"
)

// Eligible reports whether a worker may run a task, by labels. A task that
// requires labels (labels = ["spark"]) may start only on a worker that
// offers every one of them (pipec worker --label spark), so its story —
// visits, "every worker exhausted", waiting — plays out among those workers
// alone: the live set CanStart, Start and Waiting take, Limits.Workers and
// the simulator's worker names are always the eligible ones. A worker
// without the labels is not a worker for that task at all: it neither
// takes a visit nor keeps the task from waiting.
//
// Eligible reports whether a worker offering offered may run a task that
// requires required: every required label is offered. A task without labels
// runs on any worker. Stores filter claims by the same rule (PostgreSQL in
// SQL: task labels <@ worker labels).
func Eligible(required, offered []string) bool {
	for _, l := range required {
		if !slices.Contains(offered, l) {
			return false
		}
	}
	return true
}

// EligibleNames returns, in order, the names of the workers (names[i] offering
// offered[i]) that may run a task requiring required.
func EligibleNames(required []string, names []string, offered [][]string) []string {
	var out []string
	for i, n := range names {
		var o []string
		if i < len(offered) {
			o = offered[i]
		}
		if Eligible(required, o) {
			out = append(out, n)
		}
	}
	return out
}

// WaitingFor says what a task waits for, the same words in pipec simulate,
// the run's status and events, and pipec submit --wait: "waiting for a
// worker: global count 3 of 4"; with labels "waiting for a worker with labels
// spark: global count 3 of 4"; and when no live worker offers the labels
// (noneLive, s unused) "waiting for a worker with labels spark (none is
// live)". Labels are written as --label takes them (comma-separated).
func WaitingFor(labels []string, l Limits, s *State, noneLive bool) string {
	with := ""
	if len(labels) > 0 {
		with = " with labels " + strings.Join(labels, ",")
	}
	if noneLive || s == nil {
		return "waiting for a worker" + with + " (none is live)"
	}
	if l.Global == NoLimit {
		return fmt.Sprintf("waiting for a worker%s: global count %d, unlimited", with, s.Failovers)
	}
	return fmt.Sprintf("waiting for a worker%s: global count %d of %d", with, s.Failovers, l.Global)
}
