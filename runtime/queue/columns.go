package queue

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/pipec/pipec/internal/failover"
)

// The stores keep a task's limits, failover state (failover.State) and
// dependents as JSON text columns, in the same format on every store; these
// read and write them.

// JSON encodes plain data (limits, a failover state, a task list, an event
// payload) for a column.
func JSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with plain data, which always encodes
	}
	return string(b)
}

// DecodeWork reads a task's limits, failover state and dependents columns
// into w.
func DecodeWork(w *Work, limits, st, deps string) error {
	if err := json.Unmarshal([]byte(limits), &w.Limits); err != nil {
		return fmt.Errorf("work %s %s: limits: %w", w.Run, w.Task, err)
	}
	if err := json.Unmarshal([]byte(st), &w.Failover); err != nil {
		return fmt.Errorf("work %s %s: failover state: %w", w.Run, w.Task, err)
	}
	if err := json.Unmarshal([]byte(deps), &w.Dependents); err != nil {
		return fmt.Errorf("work %s %s: dependents: %w", w.Run, w.Task, err)
	}
	return nil
}

// DecodeStatus reads a task's limits and failover state columns into t.
func DecodeStatus(t *TaskStatus, limits, st string) error {
	if err := json.Unmarshal([]byte(limits), &t.Limits); err != nil {
		return fmt.Errorf("work %s: limits: %w", t.Task, err)
	}
	if err := json.Unmarshal([]byte(st), &t.Failover); err != nil {
		return fmt.Errorf("work %s: failover state: %w", t.Task, err)
	}
	return nil
}

// Decoder decodes the limits and failover state columns of one read's
// rows, each distinct text once: the tasks of a run share a handful of
// distinct limits and failover states (pipec submit --wait reads every
// task at each look; a claim's candidates are mostly fresh tasks of one
// plan). Each row gets its own copy of the state's map, which a claim
// steps.
type Decoder struct {
	limits map[string]failover.Limits
	states map[string]failover.State
}

// Status is DecodeStatus.
func (d *Decoder) Status(t *TaskStatus, limits, st string) error {
	if err := d.decode(&t.Limits, &t.Failover, limits, st); err != nil {
		return fmt.Errorf("work %s: %w", t.Task, err)
	}
	return nil
}

// Candidate is DecodeWork without the dependents, which no claim reads
// (Choose and the claim use the limits and failover state alone): a
// candidate's Dependents stay nil.
func (d *Decoder) Candidate(w *Work, limits, st string) error {
	if err := d.decode(&w.Limits, &w.Failover, limits, st); err != nil {
		return fmt.Errorf("work %s %s: %w", w.Run, w.Task, err)
	}
	return nil
}

func (d *Decoder) decode(l *failover.Limits, f *failover.State, limits, st string) error {
	if d.limits == nil {
		d.limits, d.states = map[string]failover.Limits{}, map[string]failover.State{}
	}
	dl, ok := d.limits[limits]
	if !ok {
		if err := json.Unmarshal([]byte(limits), &dl); err != nil {
			return fmt.Errorf("limits: %w", err)
		}
		d.limits[limits] = dl
	}
	df, ok := d.states[st]
	if !ok {
		if err := json.Unmarshal([]byte(st), &df); err != nil {
			return fmt.Errorf("failover state: %w", err)
		}
		d.states[st] = df
	}
	*l, *f = dl, df
	f.Visits = maps.Clone(df.Visits)
	return nil
}
