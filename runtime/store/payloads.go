package store

import (
	"encoding/json"
	"time"
)

// The payloads of the three events every attempt writes (attempt.started,
// attempt.running, attempt.finished), as the stores log them. They are
// structs, not maps, because a task pays for them at each of its starts
// and ends: encoding/json writes a struct's fields in the order they are
// declared, without sorting or boxing, and the fields here are in the
// order of their JSON names, so the bytes are those the same payload
// written as a map (sorted keys) gives (TestPayloadsEncodeAsMaps).

// AttemptStartedPayload is attempt.started's: the token granted, on which
// resource, the attempt's state (queued or running) and who runs it.
type AttemptStartedPayload struct {
	LeaseMS  int64  `json:"lease_ms"`
	PID      int    `json:"pid"`
	Resource string `json:"resource"`
	State    string `json:"state"`
	Token    int64  `json:"token"`
	Worker   string `json:"worker"`
}

// StartedPayload is a's attempt.started, a started with lease.
func StartedPayload(a Attempt, lease time.Duration) AttemptStartedPayload {
	return AttemptStartedPayload{LeaseMS: lease.Milliseconds(), PID: a.PID, Resource: a.Resource, State: string(a.State),
		Token: a.Token, Worker: a.Worker}
}

// AttemptRunningPayload is attempt.running's: the process and its lease.
type AttemptRunningPayload struct {
	LeaseMS int64 `json:"lease_ms"`
	PID     int   `json:"pid"`
	Token   int64 `json:"token"`
}

// RunningPayload is attempt.running of the attempt holding token, run as r.
func RunningPayload(token int64, r Running) AttemptRunningPayload {
	return AttemptRunningPayload{LeaseMS: r.Lease.Milliseconds(), PID: r.Process.PID, Token: token}
}

// AttemptFinishedPayload is attempt.finished's: the end, and the state it
// ended from.
type AttemptFinishedPayload struct {
	Class     string `json:"class"`
	ErrorTail string `json:"error_tail"`
	ExitCode  int    `json:"exit_code"`
	State     string `json:"state"`
	Token     int64  `json:"token"`
	Was       string `json:"was"`
	// Reads are the versions of other intervals the attempt was given
	// (Outcome.Reads); omitted when none.
	Reads []Read `json:"reads,omitempty"`
}

// FinishedPayload is attempt.finished of the attempt holding token, ended
// as o from was.
func FinishedPayload(o Outcome, token int64, was AttemptState) AttemptFinishedPayload {
	return AttemptFinishedPayload{Class: o.Class, ErrorTail: o.ErrorTail, ExitCode: o.ExitCode, State: string(o.State),
		Token: token, Was: string(was), Reads: o.Reads}
}

// UnknownPayload is attempt.unknown's when a's lease expired: the token
// it held and when its lease ran out.
func UnknownPayload(a Attempt) map[string]any {
	return map[string]any{"token": a.Token, "lease_expiry": a.LeaseExpiry.Format(time.RFC3339Nano)}
}

// PayloadText is payload as the event log stores it: its JSON (a map's
// keys sorted, so the text is deterministic), or "" for none (nil, or a
// nil map).
func PayloadText(payload any) (string, error) {
	if m, ok := payload.(map[string]any); payload == nil || ok && m == nil {
		return "", nil
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// RunCreatedPayload is run.created's, as both stores log it: the run's
// pipeline, interval, code_version and plan digest, and "forced" for a
// run that reuses nothing (Run.Forced). The stores add who owns it.
func RunCreatedPayload(r Run) map[string]any {
	p := map[string]any{
		"pipeline": r.Pipeline, "interval": r.Interval, "code_version": r.CodeVersion, "plan_digest": r.PlanDigest,
	}
	if r.Forced {
		p["forced"] = true
	}
	return p
}
