package queue

import (
	"encoding/json"
	"fmt"
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
