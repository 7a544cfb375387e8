package store

import (
	"encoding/json"
	"testing"
	"time"
)

// TestPayloadsEncodeAsMaps: each attempt payload encodes to the bytes of
// the same payload as a map, which is how the log wrote them before (and
// how every other event's payload is still written): sorted keys, the
// same escaping. A field out of order, or a name misspelt, fails here.
func TestPayloadsEncodeAsMaps(t *testing.T) {
	tail := "line <1> & \"two\"\n\u2028ünï\x01"
	a := Attempt{AttemptRef: AttemptRef{Run: "p/2024-01-01/r1", Task: "t"}, Resource: "p@2024-01-01", Token: 3000000007,
		State: AttemptQueued, Worker: "w<1>", PID: 42}
	run := Running{Process: Process{PID: 4242}, Lease: 90 * time.Second}
	o := Outcome{State: AttemptFailed, Class: "transient", ExitCode: -1, ErrorTail: tail}
	for _, c := range []struct {
		name        string
		got, asMaps any
	}{
		{"started", StartedPayload(a, time.Minute), map[string]any{"token": a.Token, "resource": a.Resource, "state": string(a.State),
			"worker": a.Worker, "pid": a.PID, "lease_ms": int64(60000)}},
		{"running", RunningPayload(a.Token, run), map[string]any{"token": a.Token, "pid": 4242, "lease_ms": int64(90000)}},
		{"finished", FinishedPayload(o, a.Token, AttemptRunning), map[string]any{"state": "failed", "class": "transient", "exit_code": -1,
			"error_tail": tail, "token": a.Token, "was": "running"}},
	} {
		got, err := json.Marshal(c.got)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(c.asMaps)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, want)
		}
	}
}
