package store

import (
	"context"
	"fmt"
	"time"
)

// Process is the process of an attempt as the store records it, so that a
// rerun after a kill -9 of pipec finds it again on the same machine. A pid
// alone is no name, since the kernel reuses pids; the pid with its start time
// (clock ticks after boot, /proc/PID/stat) is unique within a boot, the boot
// id tells boots apart and the host machines.
type Process struct {
	Host  string
	Boot  string
	PID   int
	PGID  int
	Start uint64
}

// Running is what MarkRunningAs records.
type Running struct {
	// Process is the attempt's process; PID 0 records that it is about to
	// start (a launch intent: whatever the store says afterwards, the
	// attempt may have run).
	Process Process
	// Lease starts the attempt's lease (0: none).
	Lease time.Duration
	// Durable commits with synchronous=FULL, so not even a power loss takes
	// the record back. A non-idempotent task records its launch intent so:
	// its effect may happen the moment the process starts.
	Durable bool
}

// EventAttemptResolved is recorded by ResolveAttempt: a person settled an
// unknown attempt (pipec resolve).
const EventAttemptResolved = "attempt.resolved"

// ClassResolved is the class of an attempt settled by ResolveAttempt.
const ClassResolved = "resolved"

// MarkRunningAs implements Store.
func (s *SQLite) MarkRunningAs(ctx context.Context, ref AttemptRef, run Running) (Attempt, error) {
	mode := normal
	if run.Durable {
		mode = durable
	}
	var a Attempt
	err := s.write(ctx, mode, func(ctx context.Context, tx *wtx) error {
		var err error
		a, err = s.markRunning(ctx, tx, ref, run)
		return err
	})
	if err != nil {
		return Attempt{}, fmt.Errorf("mark running: %w", err)
	}
	return a, nil
}

// markRunning is MarkRunningAs inside a write (FinishAttempt uses it too,
// see Outcome.Ran).
func (s *SQLite) markRunning(ctx context.Context, tx *wtx, ref AttemptRef, run Running) (Attempt, error) {
	p, lease := run.Process, run.Lease
	cur, err := getAttempt(ctx, tx, ref)
	if err != nil {
		return Attempt{}, err
	}
	if !cur.State.CanBecome(AttemptRunning) {
		return Attempt{}, fmt.Errorf("attempt %s is %s: %w", ref, cur.State, ErrConflict)
	}
	now := s.now()
	started := nanos(cur.Started)
	if cur.State == AttemptQueued {
		started = now
	}
	host, boot := cur.Host, cur.Boot
	if p.Host != "" {
		host, boot = p.Host, p.Boot
	}
	// Conditional on the state and token read above: the WHERE is the
	// safety, not the read.
	leaseBoot, leaseUntil := s.leaseUntil(lease)
	if err := changed(tx.ExecContext(ctx, `UPDATE attempts SET state = 'running', started = ?, pid = ?, pgid = ?, proc_start = ?,
host = ?, boot_id = ?, lease_ms = ?, lease_expiry = ?, lease_boot = ?, lease_until = ?
WHERE run = ? AND task = ? AND number = ? AND state = ? AND token = ?`, started, p.PID, p.PGID, int64(p.Start), host, boot,
		lease.Milliseconds(), expiry(now, lease), leaseBoot, leaseUntil, ref.Run, ref.Task, ref.Number, string(cur.State), cur.Token)); err != nil {
		return Attempt{}, fmt.Errorf("attempt %s: %w", ref, err)
	}
	if cur.State == AttemptQueued {
		if err := appendEvent(ctx, tx, now, Event{Run: ref.Run, Kind: EventAttemptRunning, Task: ref.Task, Attempt: ref.Number},
			map[string]any{"token": cur.Token, "pid": p.PID, "lease_ms": lease.Milliseconds()}); err != nil {
			return Attempt{}, err
		}
	}
	// The update's values, without reading the row back.
	a := cur
	a.State, a.Started, a.LeaseExpiry = AttemptRunning, timeOf(started), timeOf(expiry(now, lease))
	a.PID, a.PGID, a.ProcStart, a.Host, a.Boot = p.PID, p.PGID, p.Start, host, boot
	return a, nil
}

// ResolveAttempt implements Store. The attempt's class becomes "resolved"
// and its error tail the reason; the event keeps who, why and as what.
func (s *SQLite) ResolveAttempt(ctx context.Context, ref AttemptRef, as AttemptState, reason, by string) (Attempt, error) {
	if !as.Finished() {
		return Attempt{}, fmt.Errorf("resolve %s: %q is not succeeded or failed", ref, as)
	}
	var a Attempt
	err := s.write(ctx, durable, func(ctx context.Context, tx *wtx) error {
		cur, err := getAttempt(ctx, tx, ref)
		if err != nil {
			return err
		}
		if cur.State != AttemptUnknown {
			return fmt.Errorf("resolve %s: the attempt is %s, only an unknown attempt can be resolved: %w", ref, cur.State, ErrConflict)
		}
		now := s.now()
		if err := changed(tx.ExecContext(ctx, `UPDATE attempts SET state = ?, class = ?, exit_code = 0, error_tail = ?, ended = ?, lease_expiry = 0
WHERE run = ? AND task = ? AND number = ? AND state = 'unknown'`, string(as), ClassResolved, reason, now, ref.Run, ref.Task, ref.Number)); err != nil {
			return fmt.Errorf("resolve %s: %w", ref, err)
		}
		if err := appendEvent(ctx, tx, now, Event{Run: ref.Run, Kind: EventAttemptResolved, Task: ref.Task, Attempt: ref.Number},
			map[string]any{"as": string(as), "reason": reason, "by": by, "token": cur.Token}); err != nil {
			return err
		}
		a, err = getAttempt(ctx, tx, ref)
		return err
	})
	if err != nil {
		return Attempt{}, err
	}
	return a, nil
}
