package queue

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

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

// StatusMemo keeps the tasks of a run's last status read (StatusFollower)
// with their columns' text, so that the next read of the run decodes only
// the rows that changed (and, on a store that can tell, reads only those):
// pipec submit --wait reads its run's tasks at every poll, and most rows
// are as they were.
type StatusMemo struct {
	run  string
	rows map[string]*memoRow
	dec  Decoder
	// mark is the store's own mark of the last whole read (Marked), ""
	// for none; tasks is every row's t by name (Tasks), nil when a task
	// was added since.
	mark  string
	tasks []TaskStatus
}

type memoRow struct {
	state, worker, reason, limits, failover string
	t                                       TaskStatus
	i                                       int // t's index in tasks
}

// Read starts a read of run's tasks: a memo of another run's is emptied.
func (m *StatusMemo) Read(run string) {
	if m.rows == nil || m.run != run {
		m.run, m.rows, m.mark, m.tasks = run, map[string]*memoRow{}, "", nil
	}
}

// Mark is what the store recorded of its last read of the run (Marked), ""
// when there is none. A store that can tell which rows changed after a
// mark (PostgreSQL: rows written since its snapshot) reads only those,
// and takes the others from the memo (Tasks).
func (m *StatusMemo) Mark() string { return m.mark }

// Marked records mark once a read passed every row it found to Row; ""
// makes the next read a whole one (after a failed read, say).
func (m *StatusMemo) Marked(mark string) { m.mark = mark }

// Tasks is every task the memo holds, by name (byte order, as the stores'
// ORDER BY task COLLATE "C"): after a read of the changed rows alone, the
// whole run. The slice is the memo's, valid until its next read: a read
// that changes a task rewrites its element rather than copying every task
// (pipec submit --wait reads a 10,000-task run at each poll).
func (m *StatusMemo) Tasks() []TaskStatus {
	if m.tasks == nil {
		names := slices.Sorted(maps.Keys(m.rows))
		m.tasks = make([]TaskStatus, len(names))
		for i, n := range names {
			r := m.rows[n]
			r.i, m.tasks[i] = i, r.t
		}
	}
	return m.tasks
}

// Row is a task's status from its row's columns (task, state, worker,
// reason, limits, failover), as the store holds them: the last read's when
// they are unchanged (sharing its Failover.Visits map), else decoded (as
// Decoder.Status) and kept. The bytes are not kept: a store may pass a
// buffer it reuses.
func (m *StatusMemo) Row(task, state, worker, reason, limits, st []byte) (TaskStatus, error) {
	if r := m.rows[string(task)]; r != nil && r.state == string(state) && r.worker == string(worker) &&
		r.reason == string(reason) && r.limits == string(limits) && r.failover == string(st) {
		return r.t, nil
	}
	r := &memoRow{state: string(state), worker: string(worker), reason: string(reason), limits: string(limits), failover: string(st)}
	r.t = TaskStatus{Task: string(task), State: r.state, Worker: r.worker, Reason: r.reason}
	if err := m.dec.Status(&r.t, r.limits, r.failover); err != nil {
		return TaskStatus{}, err
	}
	switch was := m.rows[r.t.Task]; {
	case was == nil:
		m.tasks = nil
	case m.tasks != nil:
		r.i, m.tasks[was.i] = was.i, r.t
	}
	m.rows[r.t.Task] = r
	return r.t, nil
}
