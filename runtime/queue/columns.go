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

// StatusDecoder is DecodeStatus for the tasks of one Status read: the
// tasks of a run share a handful of distinct limits and failover states
// (pipec submit --wait reads every task at each look), so each distinct
// text is decoded once. Each task gets its own copy of the state's map.
type StatusDecoder struct {
	limits map[string]failover.Limits
	states map[string]failover.State
}

// Decode is DecodeStatus.
func (d *StatusDecoder) Decode(t *TaskStatus, limits, st string) error {
	if d.limits == nil {
		d.limits, d.states = map[string]failover.Limits{}, map[string]failover.State{}
	}
	l, ok := d.limits[limits]
	if !ok {
		if err := json.Unmarshal([]byte(limits), &l); err != nil {
			return fmt.Errorf("work %s: limits: %w", t.Task, err)
		}
		d.limits[limits] = l
	}
	f, ok := d.states[st]
	if !ok {
		if err := json.Unmarshal([]byte(st), &f); err != nil {
			return fmt.Errorf("work %s: failover state: %w", t.Task, err)
		}
		d.states[st] = f
	}
	t.Limits, t.Failover = l, f
	t.Failover.Visits = maps.Clone(f.Visits)
	return nil
}
