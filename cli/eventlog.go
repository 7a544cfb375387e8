package cli

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/store"
)

// logEvent is one entry of a run's event log as pipec prints it in JSON:
// `pipec events RUN --json` and `pipec run --json` print the same objects,
// documented in schema/events.schema.json. Data is the payload the store
// recorded ({} when there is none).
type logEvent struct {
	Seq     int64           `json:"seq"`
	Time    time.Time       `json:"time"`
	Run     string          `json:"run"`
	Kind    string          `json:"kind"`
	Task    string          `json:"task,omitempty"`
	Attempt int             `json:"attempt,omitempty"`
	Data    json.RawMessage `json:"data"`
}

// toLogEvent converts a stored event for printing.
func toLogEvent(e store.Event) logEvent {
	data := e.Payload
	if len(data) == 0 || string(data) == "null" {
		data = json.RawMessage("{}")
	}
	return logEvent{Seq: e.Seq, Time: e.Time.UTC(), Run: e.Run, Kind: e.Kind, Task: e.Task, Attempt: e.Attempt, Data: data}
}

// logFollower is the progress of `pipec run --json`: each time the runtime
// reports a state change, it prints the run's log entries it has not printed
// yet, read back from the store. The stream is therefore the log itself, the
// same entries `pipec events RUN --json` prints afterwards, in the same
// order, whatever the runtime's own progress feed says.
type logFollower struct {
	mu sync.Mutex
	// ctx is the run's, past its end as a run's records are
	// (runtime.AfterStop): a run stopped by Ctrl-C still prints its log.
	ctx  context.Context
	st   store.Store
	enc  *json.Encoder
	run  string
	last int64
	err  error
}

func (p *logFollower) event(ev runtime.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.run == "" {
		p.run = ev.Run
	}
	p.drain()
}

func (p *logFollower) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drain()
}

// drain prints what the log holds past the last printed entry. A failed read
// is kept and stops the stream (the summary still follows).
func (p *logFollower) drain() {
	if p.run == "" || p.err != nil {
		return
	}
	evs, err := store.EventsAfter(p.ctx, p.st, p.run, p.last)
	if err != nil {
		p.err = err
		return
	}
	for _, e := range evs {
		_ = p.enc.Encode(toLogEvent(e))
		p.last = e.Seq
	}
}
