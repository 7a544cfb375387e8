package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

const pointerColumns = `sink, artifact, interval_key, version, token, unfenced, updated`

func scanPointer(sc interface{ Scan(...any) error }) (Pointer, error) {
	var p Pointer
	var updated int64
	if err := sc.Scan(&p.Sink, &p.Artifact, &p.Interval, &p.Version, &p.Token, &p.Unfenced, &updated); err != nil {
		return Pointer{}, err
	}
	p.Updated = timeOf(updated)
	return p, nil
}

func getPointer(ctx context.Context, q rowQuerier, sink, artifact, interval string) (Pointer, error) {
	p, err := scanPointer(q.QueryRowContext(ctx, `SELECT `+pointerColumns+` FROM pointers WHERE sink = ? AND artifact = ? AND interval_key = ?`,
		sink, artifact, interval))
	if errors.Is(err, sql.ErrNoRows) {
		return Pointer{}, fmt.Errorf("pointer %s/%s@%s: %w", sink, artifact, interval, ErrNotFound)
	}
	return p, err
}

// CompareAndSwapPointer implements Store. Durable: a swapped pointer survives
// power loss once it returns. (A fenced, conflicting or idempotent outcome
// swaps nothing; its event is committed at NORMAL.)
//
// The comparison and the write happen under SQLite's write lock (BEGIN
// IMMEDIATE), which every process takes before reading the pointer, so of
// several publishers racing with distinct tokens at most one wins against any
// given pointer value, and the pointer's token only grows.
func (s *SQLite) CompareAndSwapPointer(ctx context.Context, sw Swap) (CASResult, error) {
	if sw.Sink == "" || sw.Artifact == "" || sw.Interval == "" {
		return CASResult{}, fmt.Errorf("compare-and-swap: sink, artifact and interval are required")
	}
	// A fenced, conflicting or idempotent publish changes no pointer, only the
	// event log, and needs no fsync. When a (lock-free, maybe stale) read of
	// the pointer predicts that, decide at NORMAL; should the decision under
	// the lock be a swap after all, it is made again, durably.
	mode := durable
	if s.predictNoSwap(ctx, sw) {
		mode = normal
	}
	res, err := s.cas(ctx, mode, sw)
	if errors.Is(err, errSwapNeedsFull) {
		res, err = s.cas(ctx, durable, sw)
	}
	if err != nil {
		return CASResult{}, fmt.Errorf("compare-and-swap %s/%s@%s: %w", sw.Sink, sw.Artifact, sw.Interval, err)
	}
	return res, nil
}

// predictNoSwap reads the pointer outside the write lock and reports
// whether the swap would certainly change nothing.
func (s *SQLite) predictNoSwap(ctx context.Context, sw Swap) bool {
	cur, err := getPointer(ctx, s.r, sw.Sink, sw.Artifact, sw.Interval)
	if err != nil {
		return false
	}
	return (cur.Version == sw.Version && cur.Token == sw.Token) ||
		(!sw.Unfenced && cur.Token >= sw.Token) ||
		(sw.Expect != nil && *sw.Expect != cur.Token)
}

// errSwapNeedsFull stops a compare-and-swap run at NORMAL that would swap.
var errSwapNeedsFull = errors.New("swap needs a durable commit")

// cas is one compare-and-swap transaction; at any mode but durable it stops
// with errSwapNeedsFull, changing nothing, where it would swap.
func (s *SQLite) cas(ctx context.Context, mode commitMode, sw Swap) (CASResult, error) {
	var res CASResult
	err := s.write(ctx, mode, func(ctx context.Context, tx *wtx) error {
		res = CASResult{}
		v, err := getVersion(ctx, tx, sw.Version)
		if err != nil {
			return err
		}
		switch {
		case v.Artifact != sw.Artifact || v.Interval != sw.Interval:
			return fmt.Errorf("version %s is not of %s@%s: %w", v.Label(), sw.Artifact, sw.Interval, ErrConflict)
		case v.State != VersionAccepted:
			return fmt.Errorf("version %s is %s, only an accepted version is published: %w", v.Label(), v.State, ErrConflict)
		case v.Token != sw.Token:
			return fmt.Errorf("version %s was produced with token %d, not %d: %w", v.Label(), v.Token, sw.Token, ErrConflict)
		}
		now := s.now()
		cur, err := getPointer(ctx, tx, sw.Sink, sw.Artifact, sw.Interval)
		exists := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		res.Previous = cur
		next := Pointer{Sink: sw.Sink, Artifact: sw.Artifact, Interval: sw.Interval, Version: sw.Version, Token: sw.Token,
			Unfenced: sw.Unfenced, Updated: timeOf(now)}
		payload := map[string]any{
			"sink": sw.Sink, "artifact": sw.Artifact, "interval": sw.Interval,
			"version": sw.Version, "label": v.Label(), "token": sw.Token,
		}
		if sw.Unfenced {
			payload["unfenced"] = true
		}
		if exists {
			payload["current_version"] = cur.Version
			payload["current_token"] = cur.Token
		}
		ev := Event{Run: v.Run, Task: v.Task, Attempt: v.Attempt}
		switch {
		case exists && cur.Version == sw.Version && cur.Token == sw.Token:
			res.Outcome, res.Pointer = Idempotent, cur
			ev.Kind = EventPublishIdempotent
			return appendEvent(ctx, tx, now, ev, payload)
		case exists && !sw.Unfenced && cur.Token >= sw.Token:
			res.Outcome, res.Pointer = Fenced, cur
			ev.Kind = EventPublishFenced
			return appendEvent(ctx, tx, now, ev, payload)
		case sw.Expect != nil && *sw.Expect != cur.Token:
			res.Outcome, res.Pointer = Conflict, cur
			payload["expected_token"] = *sw.Expect
			ev.Kind = EventPublishConflict
			return appendEvent(ctx, tx, now, ev, payload)
		}
		if mode != durable {
			return errSwapNeedsFull
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO pointers (sink, artifact, interval_key, version, token, unfenced, updated)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (sink, artifact, interval_key) DO UPDATE SET version = excluded.version, token = excluded.token,
	unfenced = excluded.unfenced, updated = excluded.updated`,
			sw.Sink, sw.Artifact, sw.Interval, sw.Version, sw.Token, sw.Unfenced, now); err != nil {
			return err
		}
		res.Outcome, res.Pointer = Won, next
		ev.Kind = EventPublishWon
		return appendEvent(ctx, tx, now, ev, payload)
	})
	return res, err
}

// Pointer implements Store.
func (s *SQLite) Pointer(ctx context.Context, sink, artifact, interval string) (Pointer, error) {
	return getPointer(ctx, s.r, sink, artifact, interval)
}

// Pointers implements Store.
func (s *SQLite) Pointers(ctx context.Context, sink string) ([]Pointer, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+pointerColumns+` FROM pointers WHERE sink = ? ORDER BY artifact, interval_key`, sink)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Pointer
	for rows.Next() {
		p, err := scanPointer(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
