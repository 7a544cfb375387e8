package queue

import (
	"fmt"
	"strings"
)

// Pools across workers. A task's pool (pool "backfill" { slots = 2 })
// bounds how many of the pipeline's tasks in it run at once: inside one
// pipec run by its slots, and with workers in the claim, across every run
// of the pipeline and every worker. A pool is the pipeline's: two
// pipelines that both name a pool "backfill" have two pools (pool names
// are scoped by the spec that declares them), so a work row keeps its
// pool as PoolKey(pipeline, name). The slots a claim judges a task by are
// those of the plan its run was submitted with.

// PoolKey is the identity of a pipeline's pool in the work rows,
// "<pipeline>/<pool>" ("" for a task without one). Names never contain
// '/' (spec.ValidName).
func PoolKey(pipeline, pool string) string {
	if pool == "" {
		return ""
	}
	return pipeline + "/" + pool
}

// PoolName is the pool's name in its key, as the spec writes it.
func PoolName(key string) string {
	_, name, _ := strings.Cut(key, "/")
	return name
}

// PoolFull reports whether w may not be claimed for want of a slot in its
// pool: it has one with slots, and w.PoolBusy (the pipeline's tasks in
// that pool claimed now, counted in the claim's transaction) fills them.
func PoolFull(w *Work) bool {
	return w.Pool != "" && w.PoolSlots > 0 && w.PoolBusy >= w.PoolSlots
}

// PoolWaitingMessage is what a run says while its task waits for a slot
// in its pool: "task load: waiting for a slot in pool backfill (2 of 2
// busy)".
func PoolWaitingMessage(w *Work) string {
	return WaitingPrefix(w.Task) + fmt.Sprintf("waiting for a slot in pool %s (%d of %d busy)", PoolName(w.Pool), w.PoolBusy, w.PoolSlots)
}

// Pools returns the distinct pool keys with slots among cands, in their
// order: what a claim counts (and, on PostgreSQL, locks) before Choose.
func Pools(cands []Work) []string {
	var out []string
	seen := map[string]bool{}
	for i := range cands {
		if k := cands[i].Pool; k != "" && cands[i].PoolSlots > 0 && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}
