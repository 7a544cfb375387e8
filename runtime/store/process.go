package store

import "time"

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
	// Durable commits on stable storage (SQLite: synchronous=FULL), so not
	// even a power loss takes the record back. A non-idempotent task records
	// its launch intent so: its effect may happen the moment the process
	// starts.
	Durable bool
}

// EventAttemptResolved is recorded by ResolveAttempt: a person settled an
// unknown attempt (pipec resolve).
const EventAttemptResolved = "attempt.resolved"

// ClassResolved is the class of an attempt settled by ResolveAttempt.
const ClassResolved = "resolved"
