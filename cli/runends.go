package cli

import (
	"context"
	"sync"

	"github.com/pipec/pipec/runtime/queue"
)

// runEnds wakes the followers of a batch's handed-over runs when a run of
// the state ends, so the batch hands over its next interval then, not at
// its next look: one listener for the whole batch, however many runs it
// follows at once (a listener each would hold a connection each).
type runEnds struct {
	once sync.Once
	q    queue.Queue
	mu   sync.Mutex
	next chan struct{} // closed at the next run's end, then replaced
}

func newRunEnds(q queue.Queue) *runEnds { return &runEnds{q: q} }

// start listens for as long as ctx lives, if the queue can tell run ends;
// otherwise (or once it no longer can) followers only look every poll.
func (w *runEnds) start(ctx context.Context) {
	w.once.Do(func() {
		w.next = make(chan struct{})
		e, ok := w.q.(queue.RunEnds)
		if !ok {
			return
		}
		ch, err := e.RunEnded(ctx, "")
		if err != nil {
			return
		}
		go func() {
			for range ch {
				w.mu.Lock()
				close(w.next)
				w.next = make(chan struct{})
				w.mu.Unlock()
			}
		}()
	})
}

// wait returns a channel closed at the next end of any run: taken before a
// look, it cannot miss an end that comes between the look and the wait.
// Nil (never ready) without a listener.
func (w *runEnds) wait() <-chan struct{} {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next
}
