package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/queue"
)

// collectionPoll is how often an output waiting for pipec gc looks again.
const collectionPoll = 200 * time.Millisecond

// awaitCollection waits while pipec gc holds the artifact versions
// (store.Collection), before t's attempt freezes or puts any output. The
// run was recorded running before this read, so a gc that takes its hold
// later sees the run and removes no version, and one that holds it now
// may be removing the very version this output turns out to be (a digest
// met before): the output waits for it to end, saying so once in the
// run's log. A failure to read the holds is the state's, and said as why
// the outputs were not accepted.
func (r *runner) awaitCollection(ctx context.Context, t *compiler.PlanTask, l *launched) error {
	told := ""
	for {
		c, held, err := r.st.Collecting(ctx)
		if err != nil || !held {
			return err
		}
		if c.Holder != told {
			told = c.Holder
			r.record(ctx, queue.EventRunWaiting, t.Name, l.a.Number, map[string]any{
				"waiting": fmt.Sprintf("task %s: %s is removing versions from the artifact store; its outputs wait for it to finish", t.Name, c.Holder)})
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(collectionPoll):
		}
	}
}
