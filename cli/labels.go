package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/internal/failover"
	"github.com/pipec/pipec/runtime/queue"
)

// noteUnservedLabels tells the submitter, on stderr, which tasks of the plan
// require labels that no live worker offers right now: the run is recorded
// and will wait for such a worker (its status says so), but without --wait
// nobody would see it. Only a note: workers may join any time, and a failure
// to list them changes nothing about the submission.
func noteUnservedLabels(ctx context.Context, io IO, q queue.Queue, plan *compiler.Plan) {
	var offered [][]string
	listed := false
	for i := range plan.Tasks {
		t := &plan.Tasks[i]
		if len(t.Labels) == 0 {
			continue
		}
		if !listed {
			listed = true
			ws, err := q.Workers(ctx)
			if err != nil {
				return
			}
			for _, w := range ws {
				if w.Live && w.State == queue.WorkerLive {
					offered = append(offered, w.Labels)
				}
			}
		}
		served := false
		for _, o := range offered {
			if failover.Eligible(t.Labels, o) {
				served = true
				break
			}
		}
		if !served {
			fmt.Fprintf(io.Stderr, "pipec: note: task %s requires labels %s, which no live worker offers: the run waits for a worker started with --label %s\n",
				t.Name, strings.Join(t.Labels, ","), strings.Join(t.Labels, ","))
		}
	}
}
