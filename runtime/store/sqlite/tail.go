package sqlite

import (
	"context"
	"encoding/json"

	"github.com/pipec/pipec/runtime/store"
)

var _ store.EventTailer = (*Store)(nil)

// EventsAfter implements store.EventTailer: the run's events with a
// sequence number above seq, in order, what a reader following the log
// (pipec run --json) has not seen yet. The log's index on (run, seq) makes
// each call cost what it returns.
func (s *Store) EventsAfter(ctx context.Context, run string, seq int64) ([]store.Event, error) {
	rows, err := s.query(ctx, `SELECT seq, run, time, kind, task, attempt, payload FROM events WHERE run = ? AND seq > ? ORDER BY seq`, run, seq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var e store.Event
		var t int64
		var payload string
		if err := rows.Scan(&e.Seq, &e.Run, &t, &e.Kind, &e.Task, &e.Attempt, &payload); err != nil {
			return nil, err
		}
		e.Time = timeOf(t)
		if payload != "" {
			e.Payload = json.RawMessage(payload)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
