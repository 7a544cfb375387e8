package cli

import (
	"testing"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// A run dispatched through an engine waits from its run.waiting event
// until an event of the task it names follows; an event of another task
// does not end it, and a later run.waiting replaces it.
func TestRunWaitingFromTheLog(t *testing.T) {
	waiting := func(seq int64, msg string) store.Event {
		return store.Event{Seq: seq, Kind: queue.EventRunWaiting, Payload: []byte(`{"waiting":"` + msg + `"}`)}
	}
	ev := func(seq int64, kind, task string) store.Event { return store.Event{Seq: seq, Kind: kind, Task: task} }
	const x = "task extract: waiting for a worker: global count 3 of 4"
	const y = "task load: waiting for a worker with labels spark (none is live)"
	for _, c := range []struct {
		name string
		evs  []store.Event
		want string
	}{
		{"nothing", []store.Event{ev(1, "run.created", ""), ev(2, store.EventAttemptStarted, "extract")}, ""},
		{"waits", []store.Event{ev(1, "work.failover", "extract"), waiting(2, x)}, x},
		{"another task goes on", []store.Event{waiting(1, x), ev(2, store.EventAttemptStarted, "clean")}, x},
		{"the task started", []store.Event{waiting(1, x), ev(2, store.EventAttemptStarted, "extract")}, ""},
		{"replaced", []store.Event{waiting(1, x), waiting(2, y), ev(3, store.EventAttemptStarted, "extract")}, y},
		{"waits again", []store.Event{waiting(1, x), ev(2, store.EventAttemptStarted, "extract"), waiting(3, x)}, x},
	} {
		var w runWaiting
		// Fed in two parts, as a follower reads the log.
		w.add(c.evs[:1])
		w.add(c.evs[1:])
		if got := w.message(); got != c.want {
			t.Errorf("%s: waiting %q, want %q", c.name, got, c.want)
		}
		if w.seq != c.evs[len(c.evs)-1].Seq {
			t.Errorf("%s: read up to %d", c.name, w.seq)
		}
	}
}
